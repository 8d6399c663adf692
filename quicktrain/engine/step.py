"""The one optimizer step: every technique composed, no branch per technique.

``train_step`` takes one effective batch (one optimizer update) and runs it as
micro-batches: forward under autocast, loss weighted by the micro-batch's share of the
window, scaled backward (gradients all-reduced across data-parallel processes only on the
last micro-batch); then once per update: unscale, clip, step (skipped on non-finite
gradients by the fp16 scaler, or on a non-finite loss by the guard), scaler update,
zero-grad, scheduler step, and the weight-averaging object's turn (it may do nothing). Before the
split the techniques may transform the window (auto-augment, MixUp/CutMix); after the update they take their turn
(the EMA of the weights); each is a no-op when off.
"""

from __future__ import annotations

import warnings

import torch

from quicktrain.engine.guard import NonFiniteGuard
from quicktrain.engine.state import StepMetrics, TrainState
from quicktrain.techniques.accumulation import micro_weights, split_sizes

# An update the fp16 GradScaler skipped still steps the schedule (deciding otherwise would need a
# device sync every update); PyTorch then warns that the scheduler stepped before the optimizer.
# Silenced around that one call only: the filters of the process that imports quicktrain stay its own.
_SCHEDULER_ORDER = r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`"


def train_step(state: TrainState, batch: tuple[torch.Tensor, torch.Tensor]) -> StepMetrics:
    model, optimizer, scaler = state.model, state.optimizer, state.scaler
    model.train()
    images, labels = state.inputs.to_device(batch)  # (B, 3, H, W) uint8, (B,)
    window = labels.shape[0]  # samples in this window; the epoch's last may be short
    # auto-augment, erasing, MixUp/CutMix (or nothing) on the whole window before it is split: every split alike;
    # the targets may become (B, classes) probabilities, which the cross-entropy takes as they are
    images, labels = state.techniques.transform(images, labels, state.counters.num_updates)
    loss_sum = torch.zeros((), device=labels.device)

    sizes = split_sizes(window, state.micro_batch_size)  # e.g. [32, 32, 16] for 80 by 32
    micro = zip(images.split(sizes), labels.split(sizes), micro_weights(sizes))
    for i, (x, y, weight) in enumerate(micro):
        with state.distributed.sync(model, last=i == len(sizes) - 1):
            with state.precision.autocast():
                logits = model(state.resize(state.inputs(x)))  # resize: progressive resizing, or nothing
                loss = state.criterion(logits, y)  # mean over this micro-batch
            # weight = this micro-batch's share of the samples actually in the window, so
            # k micro-batches give the gradient of one batch of k times the size
            scaler.scale(loss * weight).backward()
        loss_sum += loss.detach().float() * y.shape[0]
        state.counters.micro_steps += 1

    # once per update: the scaler must unscale before clipping sees true gradient norms
    scaler.unscale_(optimizer)
    grad_norm = None
    if state.grad_clip is not None:
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), state.grad_clip)
    guard = state.guard or _default_guard(state, labels.device)
    # a NaN/Inf loss on any process makes the all-reduced gradients NaN everywhere: decide together
    applied = guard.allow(state.distributed.total(loss_sum), state.counters.num_updates)
    if applied:
        scale_before = state.scaler_skips.scale(scaler)
        scaler.step(optimizer)  # skipped when unscale_ found inf/NaN gradients
        scaler.update()  # and then the scale is lowered
        state.scaler_skips.count(scaler, scale_before)  # on the device; read at check points
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
    state.averaging.after_update(model, state.counters.num_updates)  # a no-op unless averaging is on
    state.techniques.after_update(model, state.counters.num_updates)  # e.g. the EMA of the weights
    return StepMetrics(
        loss=loss_sum / window,
        samples=window,
        micro_batches=len(sizes),
        grad_norm=grad_norm,
        lr=lr,
    )


def _default_guard(state: TrainState, device: torch.device) -> NonFiniteGuard:
    state.guard = NonFiniteGuard("stop", state.scaler.is_enabled(), device)
    return state.guard
