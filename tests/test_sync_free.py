"""No host-device synchronisation inside an update: the known sync points are never called
by ``train_step`` (nor by the device loader between batches); the device is read only at the
loop's check points. On CUDA the same is proven with ``set_sync_debug_mode("error")``."""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter

import pytest
import torch
from conftest import make_state, tiny_config, uint8_batch

from quicktrain.data.device_loader import DeviceLoader
from quicktrain.data.synthetic import make_synthetic
from quicktrain.engine.guard import NonFiniteGuard
from quicktrain.engine.step import train_step
from quicktrain.models import create_model
from quicktrain.techniques.mixing import draw

# every Python-level way a tensor's value reaches the host (each one waits for the device): reading
# a value, copying to the host, and the operations whose output size depends on the values
SYNC_POINTS = [
    (torch.Tensor, "item"),
    (torch.Tensor, "__bool__"),
    (torch.Tensor, "__float__"),
    (torch.Tensor, "__int__"),
    (torch.Tensor, "__index__"),
    (torch.Tensor, "tolist"),
    (torch.Tensor, "numpy"),
    (torch.Tensor, "cpu"),
    (torch.Tensor, "nonzero"),
    (torch.Tensor, "masked_select"),
    (torch, "nonzero"),
    (torch, "masked_select"),
    (torch, "unique"),
    (torch, "bincount"),
    (torch.amp.GradScaler, "get_scale"),
]


def _bool_mask(index: object) -> bool:
    """Whether an index holds a boolean tensor (its result's size needs the mask's values)."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in parts)


@contextlib.contextmanager
def counting_syncs():
    calls: Counter[str] = Counter()
    points = [*SYNC_POINTS, (torch.Tensor, "__getitem__")]
    saved = {(owner, name): owner.__dict__.get(name) for owner, name in points}

    def wrap(owner, name):
        original = getattr(owner, name)
        label = f"{getattr(owner, '__name__', owner)}.{name}"

        def counted(*args, **kwargs):
            if name != "__getitem__" or _bool_mask(args[1]):
                calls[label] += 1
            return original(*args, **kwargs)

        return counted

    try:
        for owner, name in points:
            setattr(owner, name, wrap(owner, name))
        yield calls
    finally:
        for (owner, name), value in saved.items():
            if value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


PLANTED = {
    "item": lambda loss: loss.item(),
    "cpu": lambda loss: loss.cpu(),
    "nonzero": lambda loss: (loss.reshape(1) > 0).nonzero(),
    "torch.nonzero": lambda loss: torch.nonzero(loss.reshape(1)),
    "boolean mask": lambda loss: loss.reshape(1)[loss.reshape(1) > 0],
    "bool()": lambda loss: bool(loss > 0),
}


@pytest.mark.parametrize("plant", sorted(PLANTED))
def test_the_proxy_catches_a_sync_planted_in_the_step(plant):
    """The positive control: each kind of sync, planted in the loss, is counted."""
    state = _fused_state(None, None)
    criterion = state.criterion

    def leaky(logits, labels):
        loss = criterion(logits, labels)
        PLANTED[plant](loss.detach())
        return loss

    state.criterion = leaky
    with counting_syncs() as calls:
        train_step(state, uint8_batch(8))
    assert sum(calls.values()) >= 2, dict(calls)  # once per micro-batch


def _fused_state(scaler: torch.amp.GradScaler | None, grad_clip: float | None):
    torch.manual_seed(0)
    state = make_state(create_model("test_resnet", num_classes=10), micro_batch_size=4, grad_clip=grad_clip)
    state.optimizer = torch.optim.SGD(state.model.parameters(), lr=0.1, momentum=0.9, fused=True)
    state.scheduler = torch.optim.lr_scheduler.LambdaLR(state.optimizer, lambda _: 1.0)
    if scaler is not None:
        precision = dataclasses.replace(state.techniques.precision, scaler=scaler)
        state.techniques = state.techniques.with_item(precision)
    state.guard = NonFiniteGuard("stop", state.techniques.precision.scaler.is_enabled(), torch.device("cpu"))
    return state


@pytest.mark.parametrize(
    "scaler",
    [None, torch.amp.GradScaler("cpu", init_scale=2.0**10)],
    ids=["guard-stop", "fp16-like-scaler"],
)
@pytest.mark.parametrize("grad_clip", [None, 1.0])
def test_train_step_calls_no_sync_point(scaler, grad_clip):
    state = _fused_state(scaler, grad_clip)
    train_step(state, uint8_batch(8))  # warm-up: lazy state (optimizer buffers, scale) is created
    with counting_syncs() as calls:
        for seed in range(3):
            train_step(state, uint8_batch(8, seed=seed))  # 2 micro-batches of 4 each
    assert dict(calls) == {}
    assert state.counters.num_updates == 4 and state.counters.micro_steps == 8


def test_mixup_cutmix_and_the_ema_add_no_sync_point():
    """The fine-tuning hooks in the step (the whole window mixed before the split, the EMA after the
    update) read nothing back: their draws are host numbers from (seed, update)."""
    from quicktrain.techniques.ema import ModelEma
    from quicktrain.techniques.mixing import BatchMix
    from quicktrain.techniques.resolve import Techniques

    state = _fused_state(None, None)
    mix = BatchMix(True, mixup=0.8, cutmix=1.0, seed=0).settle(state.model, None, 32, 10, None)
    ema = ModelEma(True, 0.9).settle(state.model, None, 32, 10, None)
    state.techniques = Techniques((*state.techniques.items, mix, ema))
    train_step(state, uint8_batch(8))
    with counting_syncs() as calls:
        for seed in range(4):  # MixUp and CutMix both drawn among them
            train_step(state, uint8_batch(8, seed=seed))
    assert dict(calls) == {}
    kinds = {draw(0, u, 0.8, 1.0, 1.0, 0.5, (32, 32)).kind for u in range(1, 5)}
    assert kinds == {"mixup", "cutmix"}


def test_the_guard_and_skip_counts_are_read_only_at_check_points():
    state = _fused_state(torch.amp.GradScaler("cpu", init_scale=2.0**10), None)
    poisoned = next(state.model.parameters())
    handle = poisoned.register_hook(lambda g: torch.full_like(g, float("inf")))
    with counting_syncs() as calls:
        train_step(state, uint8_batch(8))
    handle.remove()
    assert dict(calls) == {} and state.counters.skipped_updates == 0  # known only on the device
    state.settle()  # a check point
    assert state.counters.skipped_updates == 1


def test_the_device_loader_yields_batches_without_syncing():
    split = make_synthetic(num_train=64, num_test=1).train
    loader = DeviceLoader(split, batch_size=16, seed=0, device=torch.device("cpu"))
    iterator = iter(loader)
    next(iterator)  # the epoch's one index copy happens here
    with counting_syncs() as calls:
        rest = list(iterator)
    assert len(rest) == 3 and dict(calls) == {}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="sync debug mode needs CUDA")
@pytest.mark.parametrize("amp", ["bf16", "fp16"])
@pytest.mark.parametrize("loader", ["torch", "device"])
def test_cuda_updates_run_under_sync_debug_mode_error(tmp_path, amp, loader):
    # the torch loader's copy is asynchronous only from pinned memory: a pageable copy waits, by design
    overrides = {"run.device": "cuda", "techniques.amp": amp, "data.loader": loader, "techniques.pin_memory": True}
    _one_update_under_sync_debug_mode_error(tmp_path, overrides)


def _one_update_under_sync_debug_mode_error(tmp_path, overrides):
    """Build a CUDA run, take one warm-up update, then one more with any host sync an error."""
    from quicktrain.engine.setup import build_run

    run = build_run(tiny_config(tmp_path / "run", **overrides), progress=False)
    batches = iter(run.train_loader)
    train_step(run.state, next(batches))  # warm-up
    batch = next(batches)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        train_step(run.state, batch)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return run


@pytest.mark.skipif(not torch.cuda.is_available(), reason="sync debug mode needs CUDA")
def test_cuda_updates_with_mixup_cutmix_and_ema_run_under_sync_debug_mode_error(tmp_path):
    overrides = {"run.device": "cuda", "data.loader": "device", "data.mixup": 0.8, "data.cutmix": 1.0}
    run = _one_update_under_sync_debug_mode_error(tmp_path, {**overrides, "optim.model_ema": 0.9})
    assert run.techniques.get("ema").average is not None
    assert next(run.techniques.get("ema").average.parameters()).is_cuda


def test_evaluation_counts_without_reading_the_device():
    """The confusion matrix is accumulated with a fixed-size index_add_, not bincount (whose
    output size needs the largest label on the host)."""
    from quicktrain.metrics import confusion_matrix

    preds, targets = torch.tensor([0, 2, 1, 1]), torch.tensor([0, 1, 1, 2])
    with counting_syncs() as calls:
        cm = confusion_matrix(preds, targets, 3)
    assert dict(calls) == {}
    assert cm.tolist() == [[1, 0, 0], [0, 1, 1], [0, 1, 0]]
