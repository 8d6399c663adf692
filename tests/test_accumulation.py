"""Gradient accumulation gives the update of one big batch, including the short last window."""

import copy

import pytest
import torch
from conftest import make_state, tiny_config, uint8_batch

from quicktrain.engine import train, train_step
from quicktrain.models import create_model
from quicktrain.techniques.accumulation import Accumulation, micro_weights, plan_epoch, split_sizes


def test_ten_micro_batches_with_four_steps_make_windows_4_4_2():
    windows = plan_epoch(num_samples=80, batch_size=32, micro_batch_size=8)
    assert [len(w) for w in windows] == [4, 4, 2]
    assert micro_weights(windows[-1]) == [0.5, 0.5]
    assert Accumulation(32, 8, 4).updates_per_epoch(80) == 3


def test_short_last_micro_batch_is_weighted_by_its_size():
    assert split_sizes(20, 8) == [8, 8, 4]
    assert micro_weights([8, 8, 4]) == [0.4, 0.4, 0.2]
    assert sum(micro_weights(split_sizes(37, 5))) == pytest.approx(1.0)


def _params_after_one_step(model, batch, micro, **kw):
    state = make_state(copy.deepcopy(model), micro_batch_size=micro, **kw)
    metrics = train_step(state, batch)
    return [p.detach().clone() for p in state.model.parameters()], metrics, state


@pytest.mark.parametrize("n", [32, 20])  # 20 = 8 + 8 + 4: a short last micro-batch
def test_k_micro_batches_equal_one_batch_of_k_times_the_size(n):
    torch.manual_seed(0)
    model = create_model("test_vit", num_classes=10)  # no BatchNorm, no dropout
    batch = uint8_batch(n)
    big, big_metrics, _ = _params_after_one_step(model, batch, micro=n, momentum=0.9)
    small, small_metrics, state = _params_after_one_step(model, batch, micro=8, momentum=0.9)
    for a, b in zip(big, small):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(big_metrics.loss, small_metrics.loss, rtol=1e-5, atol=1e-6)
    assert small_metrics.micro_batches == -(-n // 8)
    assert state.counters.num_updates == 1 and state.counters.micro_steps == -(-n // 8)


def test_weighting_by_window_not_by_accum_steps():
    """Dividing the short window's micro-losses by accum_steps (the classic bug) would give a
    different update; this pins down the correct one against a hand-computed gradient."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 3))
    batch = uint8_batch(6, num_classes=3, size=4)
    state = make_state(copy.deepcopy(model), micro_batch_size=4, lr=1.0)
    train_step(state, batch)
    # reference: one batch of 6, mean loss
    ref = copy.deepcopy(model)
    x = state.inputs(batch[0])
    torch.nn.functional.cross_entropy(ref(x), batch[1]).backward()
    for p_ref, p in zip(ref.parameters(), state.model.parameters()):
        torch.testing.assert_close(p, p_ref.detach() - p_ref.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\\(\\)` has been overridden")
def test_optimizer_steps_once_per_window():
    model = create_model("test_vit", num_classes=10)
    state = make_state(model, micro_batch_size=4)
    calls = []
    original = state.optimizer.step
    state.optimizer.step = lambda *a, **k: (calls.append(1), original(*a, **k))[1]
    train_step(state, uint8_batch(16))  # 4 micro-batches
    train_step(state, uint8_batch(6))  # 2 micro-batches, the short last window
    assert len(calls) == 2
    assert state.counters.num_updates == 2 and state.counters.micro_steps == 6
    assert state.scheduler.last_epoch == 2  # the schedule advanced per update, not per micro-batch
    assert state.counters.samples == 22


@pytest.mark.slow
def test_changing_only_the_split_keeps_data_and_result(tmp_path):
    """End to end through the loader and Ignite: same samples, order and augmentation;
    for a BatchNorm-free model the same weights up to float rounding; 80 samples with an
    effective batch of 32 and micro-batches of 8 make windows of 4, 4 and 2."""
    runs = {}
    for micro in (32, 8):
        cfg = tiny_config(
            tmp_path / f"m{micro}",
            **{
                "data.max_train_samples": 80,
                "techniques.micro_batch_size": micro,
                "run.epochs": 2,
                "optim.schedule": "cosine",
            },
        )
        runs[micro] = train(cfg)
    assert runs[8].summary["optimizer_updates"] == runs[32].summary["optimizer_updates"] == 6
    assert runs[8].summary["micro_steps"] == 20 and runs[32].summary["micro_steps"] == 6
    a = torch.load(runs[32].folder / "model.pt", weights_only=True)
    b = torch.load(runs[8].folder / "model.pt", weights_only=True)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5)
    for row_a, row_b in zip(runs[32].history, runs[8].history):
        assert row_a["train_loss"] == pytest.approx(row_b["train_loss"], rel=1e-4)
        assert row_a["test_accuracy"] == row_b["test_accuracy"]
