"""Data parallelism over torch.distributed, resolved once into an object that may do nothing.

Launched by torchrun (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` in the environment), each
process joins the group (NCCL on CUDA, Gloo on CPU) and wraps its model in DDP. Gradients are
all-reduced once per optimizer update: every micro-batch but the last runs under
``no_sync``. A single process gets :data:`SINGLE`, whose methods do nothing.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from quicktrain.techniques.base import Technique


@dataclass
class Distributed(Technique):
    """This process's place in a data-parallel group; registered as ``ddp`` (always resolved, before
    the device, so the run builder passes it in)."""

    name = "ddp"
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: str | None = None
    comm_hook: str = "none"  # none: DDP's own C++ all-reduce; fp16 / bf16: gradients compressed for the wire
    allreduces: int = 0  # backward passes that all-reduced the gradients (one per update; no_sync skips the rest)

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        """DDP around ``model``; no Python communication hook unless ``comm_hook`` asks for compression
        (a Python hook replaces the C++ reducer's all-reduce, which PyTorch documents as faster)."""
        if not self.active:
            return model
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if self.comm_hook == "fp16":
            ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS)  # C++, no Python per bucket
        elif self.comm_hook == "bf16":  # no C++ built-in: PyTorch's own Python hook
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook

            ddp.register_comm_hook(None, bf16_compress_hook)
        return ddp

    @contextlib.contextmanager
    def sync(self, model: nn.Module, last: bool) -> Iterator[None]:
        """Around one micro-batch's backward: all-reduce only on the update's last one."""
        if self.active and not last:
            with model.no_sync():
                yield
        else:
            yield
            self.allreduces += self.active

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """All-reduce ``tensor`` in place by sum (identity in a single process)."""
        if self.active:
            dist.all_reduce(tensor)
        return tensor

    def total(self, tensor: torch.Tensor) -> torch.Tensor:
        """The sum over all processes, as a new tensor (``tensor`` itself in a single process)."""
        return self.sum_(tensor.clone()) if self.active else tensor

    def close(self, clean: bool = True) -> None:
        """Leave the group. Call it after the DDP wrapper is gone (its reducer holds the group).
        ``clean``: every rank got here the same way, so wait until none is still sending before the
        group goes (a rank that exits while its peer's last collective is in flight aborts the peer)."""
        if not (self.active and dist.is_initialized()):
            return
        if clean:
            if self.backend == "gloo":
                dist.monitored_barrier(timeout=datetime.timedelta(seconds=120))  # names a rank that never came
            else:
                dist.barrier()
        dist.destroy_process_group()


SINGLE = Distributed()


def resolve_distributed(device_name: str, comm_hook: str = "none") -> Distributed:
    """Join the process group when launched by torchrun with more than one process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed()
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and device_name != "cpu"
    backend = "nccl" if use_cuda else "gloo"
    if use_cuda:
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return Distributed(rank=rank, world=world, local_rank=local, backend=backend, comm_hook=comm_hook)


def resolve(cfg: object, device: object = None, distributed: Distributed | None = None) -> Distributed:
    """The group joined before the device was chosen (:func:`resolve_distributed`), as the registry's item."""
    return distributed if distributed is not None else Distributed()
