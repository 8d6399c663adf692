"""Out-of-memory recovery: halve the micro-batch and redo the update."""

from __future__ import annotations

import logging

import torch

from quicktrain.engine.state import StepMetrics, TrainState
from quicktrain.engine.step import train_step
from quicktrain.errors import TrainingError

log = logging.getLogger("quicktrain")


def step_with_oom_retry(state: TrainState, batch: tuple[torch.Tensor, torch.Tensor]) -> StepMetrics:
    """:func:`train_step`; on a CUDA out-of-memory error, halve the micro-batch (so double the
    accumulation: the effective batch and the update stay the same) and redo the update."""
    while True:
        try:
            return train_step(state, batch)
        except torch.OutOfMemoryError:
            state.optimizer.zero_grad(set_to_none=True)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if state.micro_batch_size <= 1:
                raise TrainingError(
                    "out of memory even at micro-batch 1; use a smaller model or --image-size, or a larger device"
                ) from None
            state.micro_batch_size = max(1, state.micro_batch_size // 2)
            state.counters.oom_halvings += 1
            log.warning(
                f"out of memory: micro-batch halved to {state.micro_batch_size} (accumulation steps doubled; "
                "the effective batch and the update are unchanged); retrying this update"
            )
