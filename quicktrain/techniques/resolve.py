"""Every registered technique resolved for one run, and the hooks called over all of them.

The run builder asks this object, never a technique by name: ``apply_process`` once before the
data loads, ``prepare_model`` on the module, ``settle`` once the model exists (what must be
measured on it), ``train_loader``, ``optimizer_options``, ``attach`` once the optimizer exists,
``wrap_model``, then ``banner_lines`` and ``record``; the loop calls ``start_epoch``, the step
``transform``, ``micro_input`` and ``after_update``. The step and the builder read the five it is
built from (accumulation, precision, pinning, memory format, data parallelism) through the
properties below.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from quicktrain.config import Config
from quicktrain.techniques.accumulation import Accumulation
from quicktrain.techniques.base import Built, LoaderRequest, Technique
from quicktrain.techniques.distributed import Distributed, resolve_distributed
from quicktrain.techniques.pinning import Pinning
from quicktrain.techniques.precision import Precision
from quicktrain.techniques.registry import specs


@dataclass(frozen=True)
class Techniques:
    items: tuple[Technique, ...]  # one per registered technique, in registry order

    def get(self, name: str) -> Technique:
        for item in self.items:
            if item.name == name:
                return item
        raise KeyError(f"technique '{name}' was not resolved for this run")

    def with_item(self, new: Technique) -> Techniques:
        """These techniques with ``new`` in place of the item of its name (e.g. a halved micro-batch)."""
        return replace(self, items=tuple(new if item.name == new.name else item for item in self.items))

    # ---- what the step is built from ------------------------------------------------
    @property
    def accumulation(self) -> Accumulation:
        return self.get("ga")  # type: ignore[return-value]

    @property
    def precision(self) -> Precision:
        return self.get("amp")  # type: ignore[return-value]

    @property
    def pinning(self) -> Pinning:
        return self.get("pin")  # type: ignore[return-value]

    @property
    def memory_format(self) -> torch.memory_format:
        try:
            return self.get("channels_last").memory_format  # type: ignore[attr-defined]
        except KeyError:  # a hand-built set without it (tests)
            return torch.contiguous_format

    @property
    def distributed(self) -> Distributed:
        try:
            return self.get("ddp")  # type: ignore[return-value]
        except KeyError:  # a hand-built set without it (tests): one process
            return _SINGLE

    # ---- hooks over every technique -------------------------------------------------
    def apply_process(self) -> None:
        for item in self.items:
            item.apply_process()

    def restore_process(self) -> None:
        for item in reversed(self.items):
            item.restore_process()

    def prepare_model(self, model: nn.Module) -> nn.Module:
        for item in self.items:
            model = item.prepare_model(model)
        return model

    def settle(self, model: nn.Module, image_size: int, num_classes: int, device: torch.device) -> Techniques:
        """What must be measured on the built model (``micro_batch_size=auto``)."""
        return replace(self, items=tuple(i.settle(model, self, image_size, num_classes, device) for i in self.items))

    def wrap_model(self, model: nn.Module) -> nn.Module:
        for item in self.items:
            model = item.wrap_model(model)
        return model

    def train_loader(self, request: LoaderRequest) -> Any | None:
        """The first technique's own loader for the training split (None: the DataLoader)."""
        for item in self.items:
            loader = item.train_loader(request)
            if loader is not None:
                return loader
        return None

    def attach(self, built: Built) -> None:
        for item in self.items:
            item.attach(built)

    def optimizer_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        for item in self.items:
            options.update(item.optimizer_options())
        return options

    def banner_lines(self) -> list[str]:
        """One line per technique that has something to say, named as its ablation arm."""
        return [f"  {item.name:<13} {text}" for item in self.items if (text := item.banner())]

    # ---- hooks during training -------------------------------------------------------
    def start_epoch(self, epoch: int) -> None:
        for item in self.items:
            item.start_epoch(epoch)

    def micro_input(self, x: torch.Tensor) -> torch.Tensor:
        for item in self.items:
            x = item.micro_input(x)
        return x

    def transform(self, images: torch.Tensor, targets: torch.Tensor, update: int) -> tuple[torch.Tensor, torch.Tensor]:
        for item in self.items:
            images, targets = item.transform(images, targets, update)
        return images, targets

    def after_update(self, model: nn.Module, update: int) -> None:
        for item in self.items:
            item.after_update(model, update)

    def scored_model(self, model: nn.Module) -> nn.Module:
        for item in self.items:
            model = item.scored_model(model)
        return model

    def state_dict(self) -> dict[str, Any]:
        return {item.name: state for item in self.items if (state := item.state_dict())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for item in self.items:
            if item.name in state:
                item.load_state_dict(state[item.name])

    def record(self) -> dict[str, Any]:
        """Every technique's summary fields, and the number of data-parallel processes."""
        out: dict[str, Any] = {}
        for item in self.items:
            out.update(item.record())
        out["world_size"] = self.distributed.world
        return out


_SINGLE = Distributed()
__all__ = ["Distributed", "Techniques", "resolve_group", "resolve_techniques"]


def resolve_group(cfg: Config) -> Distributed:
    """This process's place in a data-parallel group (joined when torchrun started several); resolved
    before the device, since the group picks each process's GPU."""
    return resolve_distributed(cfg.run.device, cfg.techniques.ddp_comm_hook)


def resolve_techniques(cfg: Config, device: torch.device, distributed: Distributed | None = None) -> Techniques:
    """Resolve every registered technique for ``device``; ``distributed``: this process's place in a
    data-parallel group (one process if None), so the accumulation plan is per process."""
    distributed = distributed or Distributed()
    return Techniques(tuple(s.load()(cfg, device, distributed) for s in specs()))
