"""Memory format (channels-last) and torch.compile: model-level techniques."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

from quicktrain.techniques.base import Technique
from quicktrain.techniques.base import unwrap as unwrap

log = logging.getLogger(__name__)


def memory_format(channels_last: bool) -> torch.memory_format:
    # NHWC lets cuDNN / oneDNN pick convolution kernels that avoid layout transposes,
    # which pays off most with tensor cores and mixed precision
    return torch.channels_last if channels_last else torch.contiguous_format


@dataclass(frozen=True)
class ChannelsLast(Technique):
    active: bool
    name = "channels_last"

    @property
    def memory_format(self) -> torch.memory_format:
        """The layout of the model's weights and of every input batch."""
        return memory_format(self.active)

    def prepare_model(self, model: nn.Module) -> nn.Module:
        return model.to(memory_format=self.memory_format) if self.active else model

    def banner(self) -> str:
        return "on (weights and inputs NHWC)" if self.active else "off"

    def record(self) -> dict[str, object]:
        return {"channels_last": self.active}


@dataclass(frozen=True)
class Compile(Technique):
    """``torch.compile``. Dynamo compiles the forward once per input layout, grad mode, shape
    before its batch dimension turns dynamic, and ``requires_grad`` pattern, and falls back to
    eager past ``recompile_limit`` graphs (8): the record counts the graphs the run compiled
    (``compiled_graphs``; evaluation views keep the training layout so they add none)."""

    active: bool
    graphs_before: int = 0  # dynamo's process-wide count of compiled graphs when the run was built
    name = "compile"

    def wrap_model(self, model: nn.Module) -> nn.Module:
        return maybe_compile(model, self.active)

    def banner(self) -> str:
        return "on (torch.compile)" if self.active else "off"

    def restore_process(self) -> None:  # the run has ended: say if dynamo gave up on a forward
        if self.active and compiled_graphs() - self.graphs_before >= recompile_limit():
            log.warning(
                f"torch.compile compiled {compiled_graphs() - self.graphs_before} graphs, dynamo's recompile limit "
                f"({recompile_limit()}): later shapes or modes may have run uncompiled (TORCH_LOGS=recompiles says why)"
            )

    def record(self) -> dict[str, object]:
        if not self.active:
            return {"compile": False}
        return {"compile": True, "compiled_graphs": compiled_graphs() - self.graphs_before}


def recompile_limit() -> int:
    import torch._dynamo.config as dynamo

    return int(getattr(dynamo, "recompile_limit", None) or dynamo.cache_size_limit)


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process so far (0 before any ``torch.compile``)."""
    import sys

    utils = sys.modules.get("torch._dynamo.utils")  # never import dynamo just to count nothing
    return int(utils.counters["stats"]["unique_graphs"]) if utils is not None else 0


def maybe_compile(model: nn.Module, enabled: bool) -> nn.Module:
    """``torch.compile`` the model, or return it unchanged. The original stays reachable."""
    return torch.compile(model) if enabled else model


def resolve_channels_last(cfg, device: torch.device, distributed=None) -> ChannelsLast:
    return ChannelsLast(cfg.techniques.channels_last)


def resolve_compile(cfg, device: torch.device, distributed=None) -> Compile:
    return Compile(cfg.techniques.compile, compiled_graphs() if cfg.techniques.compile else 0)
