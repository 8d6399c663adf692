"""Techniques that only act on CUDA: TF32, cuDNN autotuning and fused optimizer kernels.

- ``tf32`` (a technique, off by default so the baseline is PyTorch's plain fp32): TF32 for
  float32 matmuls and convolutions. On CUDA both flags are set explicitly either way, because
  PyTorch's default for ``torch.backends.cudnn.allow_tf32`` is True: an arm recorded as "tf32
  off" must not run its convolutions in TF32.
- ``cuda_kernels`` (always on with a GPU, not an ablation arm): cuDNN autotuning for the fixed
  input shapes quicktrain trains on, and the fused optimizer kernels (which also let the fp16
  GradScaler skip an update on the device instead of reading its inf flag on the host).

Process-wide flags are saved when applied and put back when the run ends, so ``train()``
leaves its caller's process as it found it and autotune's candidates do not leak into each other.
On a CPU none of them applies; the record says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from quicktrain.techniques.base import Technique


@dataclass
class TF32(Technique):
    requested: bool
    cuda: bool  # on a CUDA device: the flags are set (to True or False) and restored
    saved: tuple[bool, bool] | None = field(default=None, repr=False)
    name = "tf32"

    @property
    def active(self) -> bool:
        return self.requested and self.cuda

    @property
    def note(self) -> str:
        return "CUDA-only" if self.requested and not self.cuda else ""

    def apply_process(self) -> None:
        if not self.cuda:
            return
        self.saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = self.requested
        torch.backends.cudnn.allow_tf32 = self.requested

    def restore_process(self) -> None:
        if self.saved is not None:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.saved
            self.saved = None

    def banner(self) -> str | None:
        if self.cuda:
            return "on (matmuls and convolutions)" if self.requested else "off (matmuls and convolutions in fp32)"
        return self.inactive() if self.requested else None

    def record(self) -> dict[str, Any]:
        return {"tf32": self.requested, "tf32_active": self.active}


@dataclass
class CudaKernels(Technique):
    active: bool  # a CUDA device
    saved: bool | None = field(default=None, repr=False)
    name = "cuda_kernels"

    def apply_process(self) -> None:
        if self.active:
            self.saved = torch.backends.cudnn.benchmark
            # every training batch has the same shape (the epoch's last may differ once)
            torch.backends.cudnn.benchmark = True

    def restore_process(self) -> None:
        if self.saved is not None:
            torch.backends.cudnn.benchmark = self.saved
            self.saved = None

    def optimizer_options(self) -> dict[str, Any]:
        return {"fused": True} if self.active else {}

    def banner(self) -> str | None:
        return "cudnn.benchmark on, fused optimizer kernels where the optimizer has them" if self.active else None

    def record(self) -> dict[str, Any]:
        return {"cudnn_benchmark": self.active}


def resolve_tf32(cfg, device: torch.device, distributed=None) -> TF32:
    return TF32(cfg.techniques.tf32, device.type == "cuda")


def resolve_kernels(cfg, device: torch.device, distributed=None) -> CudaKernels:
    return CudaKernels(device.type == "cuda")
