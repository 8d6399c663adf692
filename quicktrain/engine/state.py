"""Everything the training step reads and updates, in one explicit object."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from quicktrain.data.prepare import InputPipeline
from quicktrain.engine.guard import NonFiniteGuard
from quicktrain.techniques.resolve import Techniques


@dataclass
class Counters:
    """Progress, in the units that matter: optimizer updates are not micro-batches."""

    epoch: int = 0  # completed epochs
    num_updates: int = 0  # optimizer updates attempted, skipped ones included
    skipped_updates: int = 0  # updates skipped for non-finite gradients (GradScaler or --on-nonfinite skip)
    micro_steps: int = 0  # forward/backward passes
    oom_halvings: int = 0  # times an out-of-memory error halved the micro-batch
    samples: int = 0  # training samples consumed
    train_time_s: float = 0.0  # training time so far, evaluation excluded
    data_wait_s: float = 0.0  # of that, seconds the loop waited for the next batch (mean over ranks)
    wall_time_s: float = 0.0  # wall time of earlier processes of this run (resume)
    time_to_target_s: float | None = None  # train time when test accuracy first hit target
    updates_to_target: int | None = None  # ... the optimizer updates done then
    epochs_to_target: float | None = None  # ... and the epochs (fractional with --eval-every-steps)
    accuracy_at_target: float | None = None  # the test accuracy of that evaluation
    best_val_accuracy: float | None = None  # the best validation accuracy so far (best.pt holds its weights)
    best_val_update: int | None = None
    best_val_epoch: float | None = None
    best_val_weights: str | None = None  # "scored" (the EMA, or the only weights) or "raw" (the trained ones)
    evals_since_best: int = 0  # evaluations without a better validation accuracy (--early-stop)

    def snapshot(self) -> Counters:
        return dataclasses.replace(self)

    def state_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)


@dataclass
class TrainState:
    """What the step reads and updates. Techniques are one field: the step and the loop call their
    hooks (:class:`~quicktrain.techniques.resolve.Techniques`) and read the five it is built from
    (accumulation, precision, pinning, memory format, data parallelism) through it."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    criterion: nn.Module
    inputs: InputPipeline
    techniques: Techniques
    grad_clip: float | None = None
    counters: Counters = field(default_factory=Counters)
    guard: NonFiniteGuard | None = None  # None: "stop" on the model's device

    def settle(self) -> None:
        """Bring device-side counts into the host counters (at check points only)."""
        self.counters.skipped_updates += self.techniques.precision.skips.settle()


@dataclass(frozen=True)
class StepMetrics:
    """What one optimizer update reports. Tensors stay on the device: reading them forces a
    sync, so loggers do that only when they print."""

    loss: torch.Tensor  # mean training loss over the window (unscaled, unweighted)
    samples: int
    micro_batches: int
    grad_norm: torch.Tensor | None  # before clipping; None when clipping is off
    lr: float
