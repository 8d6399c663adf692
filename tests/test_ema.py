"""The EMA of the weights: values against the formula, what a run scores and saves with it."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config

from quicktrain import train
from quicktrain.techniques.ema import ModelEma, ema_decay


def test_decay_follows_timms_warmup_and_caps_at_the_decay():
    assert ema_decay(1, 0.999) == 0.0  # the first update copies the weights
    assert ema_decay(5, 0.999) == pytest.approx(1 - 5 ** (-2 / 3))
    assert ema_decay(10**6, 0.999) == 0.999
    assert ema_decay(5, 0.9, warmup=False) == 0.9 and ema_decay(1, 0.9, warmup=False) == 0.0


@pytest.mark.parametrize("warmup", [True, False])
def test_the_average_is_the_recurrence_over_every_float_tensor_and_copies_integers(warmup):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    ema = ModelEma(True, 0.8, warmup).settle(model, None, 0, 0, None)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    for update in range(1, 7):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
            model[1].running_mean.add_(1.0)
            model[1].num_batches_tracked.add_(1)
        ema.after_update(model, update)
        d = ema_decay(update, 0.8, warmup)
        for k, v in model.state_dict().items():
            expected[k] = d * expected[k] + (1 - d) * v if v.is_floating_point() else v.clone()
    for k, v in ema.scored_model(model).state_dict().items():
        torch.testing.assert_close(v, expected[k])
    assert not any(p.requires_grad for p in ema.average.parameters())


def test_an_inactive_ema_scores_the_trained_model_and_saves_nothing():
    model = torch.nn.Linear(2, 2)
    ema = ModelEma(False).settle(model, None, 0, 0, None)
    ema.after_update(model, 3)
    assert ema.scored_model(model) is model and ema.state_dict() == {}


def test_a_run_scores_the_average_saves_it_and_records_the_trained_weights_beside(tmp_path):
    cfg = tiny_config(tmp_path, **{"optim.model_ema": 0.5, "run.epochs": 2, "data.val_fraction": 0.25})
    result = train(cfg)
    s = result.summary
    assert s["model_ema"] == 0.5 and s["raw_test_accuracy"] is not None and s["raw_val_accuracy"] is not None
    assert s["best_checkpoint"]["weights"] in ("scored", "raw")
    ckpt = torch.load(sorted((tmp_path / "checkpoints").glob("*.pt"))[-1], weights_only=True)
    saved = torch.load(tmp_path / "model.pt", weights_only=True)
    average = ckpt["techniques"]["ema"]["average"]
    assert any(not torch.equal(average[k], ckpt["model"][k]) for k in average)  # the average is not the weights
    for k in saved:
        torch.testing.assert_close(saved[k], average[k], rtol=0, atol=0)  # model.pt holds the average
    row = result.history[-1]
    assert row["test_accuracy"] == s["test_accuracy"] and "raw_test_accuracy" in row
