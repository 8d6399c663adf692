"""Optimizer and learning-rate schedule from the config; schedules step per update."""

from __future__ import annotations

import math

import torch
from torch import nn

from quicktrain.config import OptimConfig


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Decay weights; leave biases and norm scales (1-D tensors) undecayed, as is usual:
    decaying a BatchNorm/LayerNorm scale only fights the normalisation."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (no_decay if p.ndim <= 1 else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    groups = param_groups(model, cfg.weight_decay)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov and cfg.momentum > 0)
    if cfg.optimizer == "adam":
        # Adam's weight_decay is L2 added to the gradient (the study's setting)
        return torch.optim.Adam(groups, lr=cfg.lr)
    return torch.optim.AdamW(groups, lr=cfg.lr)


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: OptimConfig, total_updates: int, updates_per_epoch: int
) -> torch.optim.lr_scheduler.LRScheduler:
    if cfg.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer,
            max_lr=cfg.lr,
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
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda update: 1.0)
