"""Speed techniques, each resolved once into an object that may do nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from quicktrain.config import Config
from quicktrain.techniques.accumulation import Accumulation, micro_weights, plan_epoch, split_sizes
from quicktrain.techniques.conv_wgrad import use_gemm_weight_grad
from quicktrain.techniques.cuda_switches import CudaSwitches, resolve_cuda_switches
from quicktrain.techniques.distributed import Distributed, resolve_distributed
from quicktrain.techniques.host_memory import HostAllocator, resolve_host_allocator
from quicktrain.techniques.layout import maybe_compile, memory_format, unwrap
from quicktrain.techniques.pinning import Pinning, resolve_pinning
from quicktrain.techniques.precision import Precision, cpu_supports_bf16, resolve_precision


@dataclass(frozen=True)
class Techniques:
    accumulation: Accumulation
    precision: Precision
    pinning: Pinning
    memory_format: torch.memory_format
    compile: bool
    gemm_wgrad: bool = False  # CPU only: resolved off on CUDA
    distributed: Distributed = field(default_factory=Distributed)
    cuda: CudaSwitches = field(default_factory=lambda: CudaSwitches(False, False, False, False))
    host_allocator: HostAllocator = field(default_factory=lambda: HostAllocator("system", False))

    def describe(self) -> dict[str, object]:
        """What was derived, for the start-up banner and the run record."""
        acc = self.accumulation
        return {
            "batch_size": acc.batch_size,
            "micro_batch_size": acc.micro_batch_size,
            "accum_steps": acc.accum_steps,
            "amp": self.precision.name,
            "amp_requested": self.precision.requested,
            "grad_scaler": self.precision.needs_scaler,
            "pin_memory": self.pinning.requested,
            "pin_memory_active": self.pinning.active,
            "channels_last": self.memory_format == torch.channels_last,
            "compile": self.compile,
            "gemm_wgrad": self.gemm_wgrad,
            "world_size": self.distributed.world,
            **self.cuda.describe(),
            **self.host_allocator.describe(),
        }


def resolve_techniques(cfg: Config, device: torch.device, distributed: Distributed | None = None) -> Techniques:
    """``distributed``: this process's place in a data-parallel group (one process if None);
    the accumulation plan is then per process, for its share of the global batch."""
    distributed = distributed or Distributed()
    micro, accum = cfg.accumulation(distributed.world)
    t = cfg.techniques
    return Techniques(
        accumulation=Accumulation(cfg.run.batch_size // distributed.world, micro, accum),
        precision=resolve_precision(t.amp, device),
        pinning=resolve_pinning(t.pin_memory, device),
        memory_format=memory_format(t.channels_last),
        compile=t.compile,
        gemm_wgrad=t.gemm_wgrad and device.type == "cpu",
        distributed=distributed,
        cuda=resolve_cuda_switches(t.tf32, device),
        host_allocator=resolve_host_allocator(t.cpu_allocator, device),
    )


__all__ = [
    "Accumulation",
    "CudaSwitches",
    "Distributed",
    "HostAllocator",
    "Pinning",
    "Precision",
    "Techniques",
    "cpu_supports_bf16",
    "maybe_compile",
    "memory_format",
    "micro_weights",
    "plan_epoch",
    "resolve_distributed",
    "resolve_pinning",
    "resolve_precision",
    "resolve_techniques",
    "split_sizes",
    "unwrap",
    "use_gemm_weight_grad",
]
