"""Lookahead weight averaging: the arithmetic, BatchNorm statistics, the end state, resume."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from quicktrain.techniques.averaging import Lookahead, NoAveraging, resolve_averaging


def _set(model: nn.Module, value: float) -> None:
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.fill_(value)


def test_off_is_an_object_that_does_nothing() -> None:
    model = nn.Linear(2, 2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    averaging = resolve_averaging(None, every=5, total_updates=10)
    assert isinstance(averaging, NoAveraging) and not averaging.active
    for update in range(1, 11):
        averaging.after_update(model, update)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_slow_weights_follow_the_schedule_and_the_model_ends_on_them() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    la = Lookahead(final_decay=0.8, every=1, total_updates=3)
    _set(model, 1.0)
    la.after_update(model, 1)  # first call: the slow weights start here
    _set(model, 3.0)
    la.after_update(model, 2)
    decay = 0.8 * (2 / 3) ** 3
    expected = decay * 1.0 + (1 - decay) * 3.0
    for key, tensor in model.state_dict().items():
        if tensor.is_floating_point():  # weights, biases and BatchNorm statistics alike
            assert torch.allclose(tensor, torch.full_like(tensor, expected)), key
    assert int(model[1].num_batches_tracked) == 0  # integer buffers are left alone
    _set(model, 5.0)
    la.after_update(model, 3)  # the last update: the model takes the slow weights
    assert torch.allclose(model[0].weight, torch.full_like(model[0].weight, expected))


def test_only_every_kth_update_averages() -> None:
    model = nn.Linear(1, 1, bias=False)
    la = Lookahead(final_decay=0.9, every=4, total_updates=100)
    _set(model, 0.0)
    la.after_update(model, 4)
    _set(model, 2.0)
    for update in (5, 6, 7):
        la.after_update(model, update)
        assert float(model.weight.detach()) == 2.0
    la.after_update(model, 8)
    assert float(model.weight.detach()) == pytest.approx(2.0 * (1 - 0.9 * 0.08**3))


def test_state_dict_round_trip() -> None:
    model = nn.Linear(2, 2)
    la = Lookahead(0.8, 1, 10)
    la.after_update(model, 1)
    other = Lookahead(0.8, 1, 10)
    other.load_state_dict(la.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(la.slow.values(), other.slow.values()))


def test_restored_slow_weights_live_beside_the_model() -> None:
    """Checkpoints load on the CPU; the slow weights must go back to the live model's device (on
    CUDA a CPU copy made the next lerp_ fail). A model on the meta device stands in for a GPU."""
    saved = Lookahead(0.8, 1, 10)
    saved.after_update(nn.Linear(2, 2), 1)
    state = saved.state_dict()  # CPU tensors, as load_checkpoint(map_location="cpu") gives
    live = Lookahead(0.8, 1, 10, model=nn.Linear(2, 2, device="meta"))
    live.load_state_dict(state)
    assert live.started and {t.device.type for t in live.slow.values()} == {"meta"}


def test_averaging_allocates_nothing_during_an_update() -> None:
    """Allocated with the model: an update (inside the OOM-retried region) only copies in place,
    so an out-of-memory error cannot strike after the optimizer step."""
    model = nn.Linear(3, 3)
    la = Lookahead(0.8, 1, 10, model=model)
    buffers = {k: v.data_ptr() for k, v in la.slow.items()}
    _set(model, 2.0)
    la.after_update(model, 1)
    assert {k: v.data_ptr() for k, v in la.slow.items()} == buffers
    assert all(torch.equal(la.slow[k], v) for k, v in model.state_dict().items())  # started at the weights
    assert Lookahead(0.8, 1, 10, model=model).state_dict() == {"slow": None}  # not started: nothing to save


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the device mismatch needs a CUDA device")
def test_cuda_resume_with_lookahead_continues(tmp_path) -> None:
    """A checkpoint loaded on the CPU and restored into a CUDA run: the next averaging step runs."""
    import io

    from conftest import tiny_config

    from quicktrain.engine.checkpoint import capture, restore
    from quicktrain.engine.setup import build_run
    from quicktrain.engine.step import train_step

    overrides = {"run.device": "cuda", "optim.lookahead": 0.8, "optim.lookahead_every": 1}
    first = build_run(tiny_config(tmp_path / "a", **overrides), progress=False)
    batch = next(iter(first.train_loader))
    train_step(first.state, batch)
    buffer = io.BytesIO()
    torch.save(capture(first.state, {}), buffer)
    buffer.seek(0)
    second = build_run(tiny_config(tmp_path / "b", **overrides), progress=False)
    restore(second.state, torch.load(buffer, map_location="cpu", weights_only=True))
    train_step(second.state, batch)  # lerp_ between the restored slow weights and the CUDA model
    assert {t.device.type for t in second.state.techniques.get("lookahead").slow.values()} == {"cuda"}
