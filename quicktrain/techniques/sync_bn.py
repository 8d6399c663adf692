"""BatchNorm statistics over the global batch under torchrun (``--sync-bn``).

With data parallelism each process normalises with the statistics of its own share of the
batch; with small per-process batches those are noisy. ``--sync-bn`` converts every BatchNorm
layer so training-mode statistics are summed over all processes first (evaluation uses the
running statistics, as before). On CUDA that is PyTorch's ``nn.SyncBatchNorm``; PyTorch's
refuses CPU tensors, so on a CPU (Gloo) :class:`CrossRank` layers do the same with one
autograd-aware all-reduce of (sum, sum of squares, count) per layer and step: the gradients flow
back through the shared statistics to every process, as with ``nn.SyncBatchNorm``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from quicktrain.techniques.base import Technique


def cross_rank_batch_norm(bn: nn.modules.batchnorm._BatchNorm, x: torch.Tensor) -> torch.Tensor:
    """Training-mode batch norm of ``x`` with statistics over every process's share of the batch,
    the running statistics of ``bn`` updated with them."""
    from torch.distributed.nn.functional import all_reduce  # differentiable: gradients cross back

    channels, dims = x.size(1), [0, *range(2, x.dim())]
    xf = x.float()
    count = torch.full((1,), xf.numel() / channels, device=x.device)
    stats = all_reduce(torch.cat([xf.sum(dims), (xf * xf).sum(dims), count]))
    n = stats[-1]
    mean = stats[:channels] / n
    var = (stats[channels : 2 * channels] / n - mean * mean).clamp_min(0)  # biased, as BatchNorm normalises
    if bn.track_running_stats:
        with torch.no_grad():
            bn.num_batches_tracked.add_(1)
            factor = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked)
            bn.running_mean.lerp_(mean.to(bn.running_mean.dtype), factor)
            bn.running_var.lerp_((var * n / (n - 1).clamp_min(1)).to(bn.running_var.dtype), factor)
    shape = (1, channels) + (1,) * (x.dim() - 2)
    y = (xf - mean.view(shape)) * torch.rsqrt(var.view(shape) + bn.eps)
    if bn.affine:
        y = y * bn.weight.view(shape) + bn.bias.view(shape)
    return y.to(x.dtype)


class CrossRank:
    """Mixed into a BatchNorm layer's own class (``BatchNorm2d``, timm's ``BatchNormAct2d``...):
    training-mode statistics over all processes; everything else, keys included, unchanged."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        y = cross_rank_batch_norm(self, x)
        if hasattr(self, "act"):  # timm's BatchNormAct2d: norm, then dropout and activation
            y = self.act(self.drop(y))
        return y


_CLASSES: dict[type, type] = {}


def convert(model: nn.Module) -> nn.Module:
    """Every BatchNorm layer of ``model`` made :class:`CrossRank` in place (its class swapped for a
    subclass, so parameters, statistics and state-dict keys stay as they are)."""
    for module in model.modules():
        kind = type(module)
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and not issubclass(kind, (CrossRank, nn.SyncBatchNorm)):
            if kind not in _CLASSES:
                _CLASSES[kind] = type(f"CrossRank{kind.__name__}", (CrossRank, kind), {"__module__": __name__})
            module.__class__ = _CLASSES[kind]
    return model


@dataclass(frozen=True)
class SyncBatchNorm(Technique):
    active: bool
    native: bool = False  # CUDA: PyTorch's nn.SyncBatchNorm
    note: str = ""
    name = "sync_bn"

    def prepare_model(self, model: nn.Module) -> nn.Module:
        if not self.active:
            return model
        if self.native:  # timm's walk keeps BatchNormAct2d's activation (torch's would drop it)
            from timm.layers import convert_sync_batchnorm

            return convert_sync_batchnorm(model)
        return convert(model)

    def banner(self) -> str | None:
        if self.note:
            return self.inactive()
        if not self.active:
            return None
        kind = "nn.SyncBatchNorm" if self.native else "statistics all-reduced across processes (Gloo/CPU)"
        return f"on (BatchNorm over the global batch: {kind})"

    def record(self) -> dict[str, object]:
        return {"sync_bn": self.active}


def resolve(cfg, device: torch.device, distributed=None) -> SyncBatchNorm:
    if not cfg.techniques.sync_bn:
        return SyncBatchNorm(False)
    if distributed is None or not distributed.active:
        return SyncBatchNorm(False, note="one process has nothing to synchronise")
    return SyncBatchNorm(True, native=device.type == "cuda")
