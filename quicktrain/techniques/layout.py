"""Memory format (channels-last) and torch.compile: model-level techniques."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from quicktrain.techniques.base import Technique


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
    active: bool
    name = "compile"

    def wrap_model(self, model: nn.Module) -> nn.Module:
        return maybe_compile(model, self.active)

    def banner(self) -> str:
        return "on (torch.compile)" if self.active else "off"

    def record(self) -> dict[str, object]:
        return {"compile": self.active}


def maybe_compile(model: nn.Module, enabled: bool) -> nn.Module:
    """``torch.compile`` the model, or return it unchanged. The original stays reachable."""
    return torch.compile(model) if enabled else model


def unwrap(model: nn.Module) -> nn.Module:
    """The module whose state dict is saved: no DDP wrapper, no compile wrapper (in either order)."""
    while True:
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def resolve_channels_last(cfg, device: torch.device, distributed=None) -> ChannelsLast:
    return ChannelsLast(cfg.techniques.channels_last)


def resolve_compile(cfg, device: torch.device, distributed=None) -> Compile:
    return Compile(cfg.techniques.compile)
