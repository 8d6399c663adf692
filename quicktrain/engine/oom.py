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

import logging

import torch

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
        dist, micro = state.techniques.distributed, state.techniques.accumulation.micro_batch_size
        if dist.active:
            raise TrainingError(
                f"out of memory at micro-batch {micro} on rank {dist.rank} of {dist.world}; the ranks must split "
                f"alike: resume with --micro-batch-size {max(1, micro // 2)} (--resume)"
            ) from None
        if micro <= 1:
            raise TrainingError(
                "out of memory even at micro-batch 1; use a smaller model or --image-size, or a larger device"
            ) from None
        # the accumulation technique itself changes: the step, the record and a checkpoint all read it
        state.techniques = state.techniques.with_item(state.techniques.accumulation.with_micro_batch(micro // 2))
        state.counters.oom_halvings += 1
        log.warning(
            f"out of memory: micro-batch halved to {micro // 2} (accumulation steps doubled; "
            "the effective batch and the update are unchanged); retrying this update"
        )


def undo_attempt(state: TrainState, before) -> None:
    """Back to the state before a failed attempt at an update."""
    state.optimizer.zero_grad(set_to_none=True)
    state.techniques.precision.forget_attempt()  # its unscale_/step are forgotten; the scale did not change
    state.counters.load_state_dict(before.state_dict())
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
