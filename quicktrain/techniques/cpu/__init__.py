"""Techniques that only act on a CPU: weight gradients as GEMMs, glibc's allocator kept warm.

On any other device each resolves to an inactive technique that says why; nothing outside
this package names them (the registry lists them, the run builder calls their hooks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from quicktrain.techniques.base import Technique
from quicktrain.techniques.cpu.allocator import HostAllocator, resolve_host_allocator
from quicktrain.techniques.cpu.conv_wgrad import ROW_MAX_PIXELS, use_gemm_weight_grad


@dataclass
class GemmWeightGrad(Technique):
    """``techniques.gemm_wgrad``: 3x3 convolutions on small maps get their weight gradient by
    GEMM (:mod:`quicktrain.techniques.cpu.conv_wgrad`). The module's convolutions are converted
    in place (a user's own ``nn.Module`` too); the banner and the record say how many."""

    requested: bool
    active: bool
    note: str = ""
    converted: int = field(default=0)  # convolutions converted in place, known after prepare_model
    name = "gemm_wgrad"

    def prepare_model(self, model: nn.Module) -> nn.Module:
        if self.active:
            self.converted = use_gemm_weight_grad(model)
        return model

    def banner(self) -> str | None:
        if self.active:
            return (
                f"weight gradients of 3x3 convolutions on maps <= {ROW_MAX_PIXELS} px as GEMMs "
                f"({self.converted} convolutions of the model converted in place)"
            )
        return self.inactive() if self.requested else None

    def record(self) -> dict[str, object]:
        return {"gemm_wgrad": self.requested, "gemm_wgrad_active": self.active, "gemm_convs": self.converted}


def resolve_gemm_wgrad(cfg, device: torch.device, distributed=None) -> GemmWeightGrad:
    requested = cfg.techniques.gemm_wgrad
    if requested and device.type != "cpu":
        return GemmWeightGrad(True, False, "CPU-only")
    return GemmWeightGrad(requested, requested)


def resolve_allocator(cfg, device: torch.device, distributed=None) -> HostAllocator:
    return resolve_host_allocator(cfg.techniques.cpu_allocator, device)


__all__ = ["GemmWeightGrad", "HostAllocator", "resolve_allocator", "resolve_gemm_wgrad", "resolve_host_allocator"]
