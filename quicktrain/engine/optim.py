"""Optimizer and learning-rate schedule from the config; schedules step per update."""

from __future__ import annotations

import math

import torch
from torch import nn

from quicktrain.config import OptimConfig
from quicktrain.engine.muon import MuonSGD

_NORMS = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)


def param_groups(
    model: nn.Module,
    weight_decay: float,
    lr: float,
    norm_bias_lr_scale: float = 1.0,
    layer_decay: float | None = None,
) -> list[dict]:
    """Decay weights; leave biases and norm scales (1-D tensors) undecayed, as is usual:
    decaying a BatchNorm/LayerNorm scale only fights the normalisation. Norm-layer shifts
    get their own group with ``lr * norm_bias_lr_scale`` (the speedrun recipes' larger step
    for them); frozen parameters are left out. Empty groups are dropped.

    ``layer_decay``: each of those groups is split further by depth, the lr of layer ``i`` of
    ``n`` scaled by ``layer_decay ** (n - 1 - i)`` (recorded as the group's ``lr_scale``), with
    timm's layer numbering (:func:`layer_ids`): the head keeps the full lr."""
    norm_biases = {id(m.bias) for m in model.modules() if isinstance(m, _NORMS) and m.bias is not None}
    decay, no_decay, shifts = [], [], []
    for p in model.parameters():
        if p.requires_grad:
            (shifts if id(p) in norm_biases else no_decay if p.ndim <= 1 else decay).append(p)
    if norm_bias_lr_scale == 1.0:
        no_decay, shifts = no_decay + shifts, []
    groups = [
        {"params": decay, "weight_decay": weight_decay, "lr": lr},
        {"params": no_decay, "weight_decay": 0.0, "lr": lr},
        {"params": shifts, "weight_decay": 0.0, "lr": lr * norm_bias_lr_scale},
    ]
    groups = [g for g in groups if g["params"]]
    if layer_decay is None:
        return groups
    ids, layers = layer_ids(model)
    out = []
    for group in groups:
        by_layer: dict[int, list] = {}
        for p in group["params"]:
            by_layer.setdefault(ids.get(id(p), layers - 1), []).append(p)
        for layer in sorted(by_layer):
            scale = layer_decay ** (layers - 1 - layer)
            out.append({**group, "params": by_layer[layer], "lr": group["lr"] * scale, "lr_scale": scale})
    return out


def layer_ids(model: nn.Module) -> tuple[dict[int, int], int]:
    """Each parameter's layer (by ``id``) and the number of layers, for layer-wise lr decay: the
    model's ``group_matcher`` as timm numbers it (timm models: stem 0, one id per block, the head
    last), else one layer per top-level child module holding parameters, in order (the last one
    is the head)."""
    if hasattr(model, "group_matcher"):
        from timm.models import group_parameters

        by_name = group_parameters(model, model.group_matcher(coarse=False), reverse=True)
        layers = max(by_name.values(), default=0) + 1
        return {id(p): by_name.get(name, layers - 1) for name, p in model.named_parameters()}, layers
    children = [c for c in model.children() if any(True for _ in c.parameters())]
    ids = {id(p): i for i, child in enumerate(children) for p in child.parameters()}
    layers = max(len(children), 1)
    return {id(p): ids.get(id(p), layers - 1) for p in model.parameters()}, layers


def muon_weights(model: nn.Module) -> set[int]:
    """ids of the weights Muon takes: those of convolutions and of every linear layer but the
    last one (the classifier head), trainable only. Embeddings, position tables, the head,
    biases and norm parameters stay with SGD, as Muon's authors advise."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    hidden = [m for m in model.modules() if isinstance(m, nn.modules.conv._ConvNd)] + linears[:-1]
    return {id(m.weight) for m in hidden if m.weight.requires_grad}


def split_muon(groups: list[dict], model: nn.Module, cfg: OptimConfig) -> list[dict]:
    """The weight-decay group split in two: Muon's weights (``cfg.muon_lr``, ``cfg.muon_momentum``)
    and the rest; the other groups stay SGD groups."""
    chosen = muon_weights(model)
    out = []
    for group in groups:
        muon = [p for p in group["params"] if id(p) in chosen]
        rest = [p for p in group["params"] if id(p) not in chosen]
        if rest:
            out.append({**group, "params": rest})
        if muon:
            out.append(
                {
                    "params": muon,
                    "lr": cfg.muon_lr * group.get("lr_scale", 1.0),  # layer decay scales Muon's lr alike
                    **({"lr_scale": group["lr_scale"]} if "lr_scale" in group else {}),
                    "momentum": cfg.muon_momentum,
                    "muon": True,
                    "fixed_norm": cfg.muon_fixed_norm,
                    "weight_decay": 0.0,
                }
            )
    return out


def build_optimizer(model: nn.Module, cfg: OptimConfig, fused: bool = False) -> torch.optim.Optimizer:
    """``fused``: one kernel for all parameters (CUDA); the fp16 GradScaler then skips a bad
    update on the device instead of reading its inf flag on the host."""
    groups = param_groups(model, cfg.weight_decay, cfg.lr, cfg.norm_bias_lr_scale, cfg.layer_decay)
    impl = {"fused": True} if fused else {}
    if cfg.optimizer == "sgd":
        nesterov = cfg.nesterov and cfg.momentum > 0
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=nesterov, **impl)
    if cfg.optimizer == "muon":
        dtype = None if cfg.muon_precision == "auto" else getattr(torch, cfg.muon_precision)
        return MuonSGD(
            split_muon(groups, model, cfg), cfg.lr, cfg.momentum, cfg.nesterov, cfg.muon_ns_steps, dtype=dtype
        )
    if cfg.optimizer == "adam":
        # Adam's weight_decay is L2 added to the gradient (the study's setting)
        return torch.optim.Adam(groups, lr=cfg.lr, **impl)
    return torch.optim.AdamW(groups, lr=cfg.lr, **impl)


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: OptimConfig, total_updates: int, updates_per_epoch: int
) -> torch.optim.lr_scheduler.LRScheduler:
    if cfg.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer,
            max_lr=[group["lr"] for group in optimizer.param_groups],  # each group's own peak
            total_steps=max(total_updates, 2),
            pct_start=0.3,
            cycle_momentum=cfg.optimizer == "sgd" and cfg.momentum > 0,
        )
    if cfg.schedule == "cosine":
        warmup = round(cfg.warmup_epochs * updates_per_epoch)

        def factor(update: int) -> float:
            if update < warmup:
                return (update + 1) / (warmup + 1)
            progress = (update - warmup) / max(total_updates - warmup, 1)
            return 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    if cfg.schedule == "triangle":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda update: triangle(update, total_updates))
    if cfg.schedule == "linear":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda update: max(1.0 - update / total_updates, 0.0))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda update: 1.0)


def triangle(update: int, total: int, start: float = 0.2, peak_at: float = 0.23, end: float = 0.07) -> float:
    """airbench's schedule: linear from ``start`` x peak up to the peak at ``peak_at`` of the
    updates, then linear down to ``end`` x peak at the last one. Momentum stays fixed."""
    top = max(round(peak_at * total), 1)
    if update <= top:
        return start + (1.0 - start) * update / top
    return 1.0 + (end - 1.0) * min((update - top) / max(total - top, 1), 1.0)
