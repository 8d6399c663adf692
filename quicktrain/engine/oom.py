"""Out-of-memory recovery: undo the failed attempt, halve the micro-batch, redo the update.

An OOM can come from any part of an update: the forward or backward of any micro-batch,
clipping, or the optimizer step allocating its state (optimizers allocate state before they
touch a parameter, so the weights are still those before the update). The retry starts from
the state before the attempt: gradients dropped, the GradScaler's per-optimizer state reset
(after ``unscale_`` a second ``unscale_`` would raise), and the counters as they were, so
micro-steps and samples are counted once. Known limit: BatchNorm running statistics updated by
micro-batches before the OOM are not restored (they are re-estimated by the redone update).

Under data parallelism the ranks train in lockstep; one that halved alone would wait forever
in a gradient all-reduce the others left. So a rank that runs out of memory stops the run
with a clear message instead (resume with a smaller ``--micro-batch-size``).
"""

from __future__ import annotations

import collections
import logging

import torch
from torch.amp.grad_scaler import _refresh_per_optimizer_state

from quicktrain.engine.state import StepMetrics, TrainState
from quicktrain.engine.step import train_step
from quicktrain.errors import TrainingError

log = logging.getLogger("quicktrain")


def step_with_oom_retry(state: TrainState, batch: tuple[torch.Tensor, torch.Tensor]) -> StepMetrics:
    """:func:`train_step`; on an out-of-memory error, halve the micro-batch (so double the
    accumulation: the effective batch and the update stay the same) and redo the update."""
    while True:
        before = state.counters.snapshot()
        try:
            return train_step(state, batch)
        except torch.OutOfMemoryError:
            pass  # recovered below: inside this block the traceback's frames still hold the activations
        undo_attempt(state, before)
        if state.distributed.active:
            raise TrainingError(
                f"out of memory at micro-batch {state.micro_batch_size} on rank {state.distributed.rank} of "
                f"{state.distributed.world}; the ranks must split alike: resume with --micro-batch-size "
                f"{max(1, state.micro_batch_size // 2)} (--resume)"
            ) from None
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


def undo_attempt(state: TrainState, before) -> None:
    """Back to the state before a failed attempt at an update."""
    state.optimizer.zero_grad(set_to_none=True)
    # unscale_/step of the failed attempt are forgotten; the scale itself did not change
    state.scaler._per_optimizer_states = collections.defaultdict(_refresh_per_optimizer_state)
    state.counters.load_state_dict(before.state_dict())
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
