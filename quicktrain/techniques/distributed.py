"""Data parallelism over torch.distributed, resolved once into an object that may do nothing.

Launched by torchrun (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` in the environment), each
process joins the group (NCCL on CUDA, Gloo on CPU) and wraps its model in DDP. Gradients are
all-reduced once per optimizer update: every micro-batch but the last runs under
``no_sync``. A single process gets :data:`SINGLE`, whose methods do nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass
class Distributed:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: str | None = None
    allreduces: int = 0  # gradient buckets all-reduced

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        if not self.active:
            return model
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

        # no annotations: DDP checks them, and this module's are strings (__future__ annotations)
        def counted(state, bucket):
            self.allreduces += 1
            return allreduce_hook(state, bucket)

        ddp.register_comm_hook(None, counted)
        return ddp

    @contextlib.contextmanager
    def sync(self, model: nn.Module, last: bool) -> Iterator[None]:
        """Around one micro-batch's backward: all-reduce only on the update's last one."""
        if self.active and not last:
            with model.no_sync():
                yield
        else:
            yield

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """All-reduce ``tensor`` in place by sum (identity in a single process)."""
        if self.active:
            dist.all_reduce(tensor)
        return tensor

    def total(self, tensor: torch.Tensor) -> torch.Tensor:
        """The sum over all processes, as a new tensor (``tensor`` itself in a single process)."""
        return self.sum_(tensor.clone()) if self.active else tensor

    def close(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()


SINGLE = Distributed()


def resolve_distributed(device_name: str) -> Distributed:
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
    return Distributed(rank=rank, world=world, local_rank=local, backend=backend)
