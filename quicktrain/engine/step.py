"""The one optimizer step: every technique composed, no branch per technique.

``train_step`` takes one effective batch (one optimizer update) and runs it as
micro-batches: forward under autocast, loss weighted by the micro-batch's share of the
window, scaled backward (gradients all-reduced across data-parallel processes only on the
last micro-batch); then once per update: unscale, clip, step (skipped on non-finite
gradients by the fp16 scaler, or on a non-finite loss by the guard), scaler update,
zero-grad, scheduler step. The precision technique owns backward and the optimizer step (its
GradScaler inside); before the split the techniques may transform the window (auto-augment,
MixUp/CutMix), each micro-batch's input (progressive resizing), and after the update they take
their turn in registry order (lookahead's averaging, then the EMA of the weights); each is a no-op
when off.
"""

from __future__ import annotations

import warnings

import torch

from quicktrain.engine.guard import NonFiniteGuard
from quicktrain.engine.state import StepMetrics, TrainState

# An update the fp16 GradScaler skipped still steps the schedule (deciding otherwise would need a
# device sync every update); PyTorch then warns that the scheduler stepped before the optimizer.
# Silenced around that one call only: the filters of the process that imports quicktrain stay its own.
_SCHEDULER_ORDER = r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`"


def train_step(state: TrainState, batch: tuple[torch.Tensor, torch.Tensor]) -> StepMetrics:
    t = state.techniques
    model, optimizer, precision, dist = state.model, state.optimizer, t.precision, t.distributed
    model.train()
    images, labels = state.inputs.to_device(batch)  # (B, 3, H, W) uint8, (B,)
    window = labels.shape[0]  # samples in this window; the epoch's last may be short
    # auto-augment, erasing, MixUp/CutMix (or nothing) on the whole window before it is split: every split alike;
    # the targets may become (B, classes) probabilities, which the cross-entropy takes as they are
    images, labels = t.transform(images, labels, state.counters.num_updates)
    loss_sum = torch.zeros((), device=labels.device)

    sizes, weights = t.accumulation.micro_batches(window)  # e.g. [32, 32, 16] for 80 by 32
    for i, (x, y, weight) in enumerate(zip(images.split(sizes), labels.split(sizes), weights)):
        with dist.sync(model, last=i == len(sizes) - 1):
            with precision.autocast():
                logits = model(t.micro_input(state.inputs(x)))  # micro_input: progressive resizing, or nothing
                loss = state.criterion(logits, y)  # mean over this micro-batch
            # weight = this micro-batch's share of the samples actually in the window, so
            # k micro-batches give the gradient of one batch of k times the size
            precision.backward(loss * weight)  # scaled by the fp16 GradScaler, or as it is
        loss_sum += loss.detach().float() * y.shape[0]
        state.counters.micro_steps += 1

    # once per update: the scaler must unscale before clipping sees true gradient norms
    precision.unscale(optimizer)
    grad_norm = None
    if state.grad_clip is not None:
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), state.grad_clip)
    guard = state.guard or _default_guard(state, labels.device)
    # a NaN/Inf loss on any process makes the all-reduced gradients NaN everywhere: decide together
    applied = guard.allow(dist.total(loss_sum), state.counters.num_updates)
    if applied:
        precision.optimizer_step(optimizer)  # skipped by the fp16 scaler when unscale found inf/NaN gradients
    optimizer.zero_grad(set_to_none=True)
    lr = optimizer.param_groups[0]["lr"]
    if not applied:  # the guard's "skip" policy, which decided on the host
        state.counters.skipped_updates += 1
    else:
        # schedules count optimizer updates, never micro-batches; an update the fp16 scaler
        # skipped advances it too (as in timm and Lightning): knowing that on the host would
        # cost a device sync every update
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_SCHEDULER_ORDER)
            state.scheduler.step()

    state.counters.num_updates += 1
    state.counters.samples += window
    t.after_update(model, state.counters.num_updates)  # lookahead's averaging, the EMA: each a no-op when off
    return StepMetrics(
        loss=loss_sum / window,
        samples=window,
        micro_batches=len(sizes),
        grad_norm=grad_norm,
        lr=lr,
    )


def _default_guard(state: TrainState, device: torch.device) -> NonFiniteGuard:
    state.guard = NonFiniteGuard("stop", state.techniques.precision.scaler.is_enabled(), device)
    return state.guard
