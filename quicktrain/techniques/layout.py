"""Memory format (channels-last) and torch.compile: model-level switches."""

from __future__ import annotations

import torch
from torch import nn


def memory_format(channels_last: bool) -> torch.memory_format:
    # NHWC lets cuDNN / oneDNN pick convolution kernels that avoid layout transposes,
    # which pays off most with tensor cores and mixed precision
    return torch.channels_last if channels_last else torch.contiguous_format


def maybe_compile(model: nn.Module, enabled: bool) -> nn.Module:
    """``torch.compile`` the model, or return it unchanged. The original stays reachable."""
    return torch.compile(model) if enabled else model


def unwrap(model: nn.Module) -> nn.Module:
    """The module whose state dict is saved: no DDP wrapper, no compile wrapper."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model = model.module
    return getattr(model, "_orig_mod", model)
