"""The CUDA switches users expect, resolved once: TF32 matmuls and convolutions (a technique:
off by default, so the baseline is PyTorch's plain fp32), cuDNN autotuning for the fixed input
shapes quicktrain trains on, and the fused optimizer kernels (which also let the fp16
GradScaler skip an update on the device instead of reading its inf flag on the host).
On a CPU none of them applies; the record says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CudaSwitches:
    tf32_requested: bool
    tf32: bool  # active: matmuls and convolutions in TF32
    cudnn_benchmark: bool
    fused_optimizer: bool

    def apply(self) -> None:
        """Set the process-wide flags (once, at build time)."""
        if self.tf32:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        if self.cudnn_benchmark:
            # every training batch has the same shape (the epoch's last may differ once)
            torch.backends.cudnn.benchmark = True

    def describe(self) -> dict[str, object]:
        return {
            "tf32": self.tf32_requested,
            "tf32_active": self.tf32,
            "cudnn_benchmark": self.cudnn_benchmark,
            "optimizer_impl": "fused" if self.fused_optimizer else "default",
        }


def resolve_cuda_switches(tf32: bool, device: torch.device) -> CudaSwitches:
    cuda = device.type == "cuda"
    return CudaSwitches(tf32_requested=tf32, tf32=tf32 and cuda, cudnn_benchmark=cuda, fused_optimizer=cuda)
