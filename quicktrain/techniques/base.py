"""The protocol every technique follows once it is resolved for a run.

A :class:`Technique` is one technique on one device: active, or inactive with the reason.
Every hook does nothing by default (as Lightning Fabric's ``Precision`` base class), so the
run builder calls each hook of every technique without asking which technique it is:

- :meth:`apply_process` / :meth:`restore_process`: process-wide settings (CUDA flags, the
  allocator), set once before the data loads and put back when the run ends;
- :meth:`prepare_model`: changes to the module itself, before the optimizer is built;
- :meth:`settle`: what can only be measured on the built model (``micro_batch_size=auto``);
- :meth:`wrap_model`: a wrapper around the finished module (``torch.compile``);
- :meth:`optimizer_options`: keywords for the optimizer's constructor (``fused``);
- :meth:`attach`: what needs the optimizer or the length of training (:class:`Built`): the slow
  weights of lookahead, parameters frozen for the first epochs;
- :meth:`train_loader`: a loader of its own instead of the DataLoader (the device-resident split);
- :meth:`banner` and :meth:`record`: what the start-up banner and the run record say of it.

and, during training (the step and the loop call them over all techniques alike):

- :meth:`start_epoch`: before each epoch (progressive resizing's size, early parameters' freezing);
- :meth:`transform`: the whole effective batch on the device, before it is split into micro-batches
  (auto-augment, random erasing, MixUp / CutMix), with the targets it trains on;
- :meth:`micro_input`: each micro-batch's normalised input, just before the forward (progressive
  resizing);
- :meth:`after_update`: after every optimizer update, in registry order (lookahead's averaging, then
  the EMA of the weights);
- :meth:`scored_model`: the weights evaluation scores as the run's (the EMA), the trained ones
  beside them;
- :meth:`state_dict` / :meth:`load_state_dict`: what a checkpoint keeps of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class Built:
    """What :meth:`Technique.attach` may use: the run once its optimizer exists."""

    model: nn.Module  # the module (not yet wrapped by DDP or compile)
    optimizer: torch.optim.Optimizer
    total_updates: int  # optimizer updates the run will make
    head: list[str] = field(default_factory=list)  # the parameters of a new head (--pretrained RUN) or the last layer


@dataclass(frozen=True)
class LoaderRequest:
    """What :meth:`Technique.train_loader` is asked to load: the training split, as the DataLoader would."""

    split: Any  # quicktrain.data.arrays.Split
    batch_size: int  # global effective batch
    seed: int
    device: torch.device
    augment: bool
    rank: int
    world: int
    spec: Any  # quicktrain.data.augment.AugmentSpec
    streamed: bool  # decoded per batch from files
    photos: bool  # aspect-kept photos, cropped per epoch


class Technique:
    name: str = ""  # the registry's name
    active: bool = False
    note: str = ""  # why a requested technique does nothing here

    def apply_process(self) -> None:
        """Set process-wide state (once, when the run is built, before the data loads)."""

    def restore_process(self) -> None:
        """Put back what :meth:`apply_process` changed (the run has ended)."""

    def prepare_model(self, model: nn.Module) -> nn.Module:
        """Change the module (on its device) before the optimizer sees its parameters."""
        return model

    def settle(self, model: nn.Module, techniques: Any, image_size: int, num_classes: int, device: Any) -> Technique:
        """This technique once the model exists (a new object when something was measured)."""
        return self

    def wrap_model(self, model: nn.Module) -> nn.Module:
        """Wrap the finished module (the original stays reachable through ``unwrap``)."""
        return model

    def optimizer_options(self) -> dict[str, Any]:
        """Keywords for the optimizer's constructor."""
        return {}

    def attach(self, built: Built) -> None:
        """Allocate or change what needs the optimizer or the run's length (before DDP and compile)."""

    def train_loader(self, request: LoaderRequest) -> Any | None:
        """A loader of its own for the training split (None: the DataLoader)."""
        return None

    def banner(self) -> str | None:
        """Its words in the start-up banner's technique line (None: nothing to say)."""
        return None

    def record(self) -> dict[str, Any]:
        """Its fields in the run summary."""
        return {}

    def inactive(self) -> str:
        """The banner's words for a request that does nothing here."""
        return f"asked for, but {self.note}: no effect"

    # ---- during training --------------------------------------------------------------
    def start_epoch(self, epoch: int) -> None:
        """``epoch``: 0-based index of the epoch about to run."""

    def micro_input(self, x: torch.Tensor) -> torch.Tensor:
        """One micro-batch's normalised input (B, 3, H, W), just before the forward."""
        return x

    def transform(self, images: torch.Tensor, targets: torch.Tensor, update: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The effective batch of optimizer update ``update`` (0-based) and its targets, changed."""
        return images, targets

    def after_update(self, model: nn.Module, update: int) -> None:
        """``update``: optimizer updates done so far (1 after the first)."""

    def scored_model(self, model: nn.Module) -> nn.Module:
        """The module whose evaluation is the run's score (default: the trained one)."""
        return model

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint must keep to resume it exactly (empty: nothing)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s values (loaded on the CPU)."""


def unwrap(model: nn.Module) -> nn.Module:
    """The module whose state dict is saved: no DDP wrapper, no compile wrapper (in either order)."""
    while True:
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model
