"""best.pt by the validation score, early stopping, and per-class metrics and top-5 in the record."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config

from quicktrain.config import Config
from quicktrain.engine import loop as loop_module
from quicktrain.engine import train
from quicktrain.engine.evaluate import EvalResult
from quicktrain.errors import ConfigError

# 96 samples, 10% validation -> 86 (or so) training samples; batch 16 -> 6 updates per epoch
VAL = {"data.val_fraction": 0.1, "run.batch_size": 16, "run.keep_checkpoints": 10}


def script_validation(monkeypatch: pytest.MonkeyPatch, val: list[float]) -> None:
    """Each evaluation runs the validation split, then the test split; validation follows
    ``val`` (the last value repeats), the test split always scores 0.5."""
    calls = {"n": 0}

    def fake(*args, **kwargs):
        index = calls["n"] // 2
        is_val = calls["n"] % 2 == 0
        calls["n"] += 1
        acc = val[min(index, len(val) - 1)] if is_val else 0.5
        return EvalResult(loss=1.0, accuracy=acc, f1_macro=acc, samples=10)

    monkeypatch.setattr(loop_module, "evaluate", fake)


def test_best_pt_holds_the_best_validation_epoch_when_the_score_falls_at_the_end(tmp_path, monkeypatch):
    script_validation(monkeypatch, [0.5, 0.8, 0.6])
    result = train(tiny_config(tmp_path / "run", **VAL, **{"run.epochs": 3}))
    s = result.summary
    per_epoch = s["optimizer_updates"] // 3
    expected = {"file": "best.pt", "val_accuracy": 0.8, "update": 2 * per_epoch, "epoch": 2.0, "weights": "scored"}
    assert s["best_checkpoint"] == expected
    best = torch.load(result.folder / "best.pt", weights_only=True)
    at_epoch_2 = torch.load(next((result.folder / "checkpoints").glob("checkpoint-epoch0002-*.pt")), weights_only=True)[
        "model"
    ]
    final = torch.load(result.folder / "model.pt", weights_only=True)
    assert all(torch.equal(best[k], at_epoch_2[k]) for k in best)
    assert any(not torch.equal(best[k], final[k]) for k in best)  # model.pt is the last epoch's


def test_early_stop_fires_after_patience_evaluations_without_improvement(tmp_path, monkeypatch):
    script_validation(monkeypatch, [0.5, 0.6, 0.55, 0.6, 0.59])
    s = train(tiny_config(tmp_path / "run", **VAL, **{"run.epochs": 8, "run.early_stop": 2})).summary
    assert s["status"] == "completed" and s["stopped_by"] == "early_stop"
    assert s["epochs_completed"] == 4  # best at evaluation 2; evaluations 3 and 4 not better (0.6 ties)
    assert s["best_checkpoint"]["val_accuracy"] == 0.6 and s["early_stop"] == 2


def test_early_stop_needs_a_validation_split():
    with pytest.raises(ConfigError, match="add --val-fraction"):
        Config.from_overrides({"run.early_stop": 3})


def test_the_final_evaluation_has_per_class_metrics_and_top5(tmp_path):
    s = train(tiny_config(tmp_path / "run", **{"run.epochs": 2})).summary
    rows = s["test_per_class"]
    assert [r["class"] for r in rows] == [f"class{i}" for i in range(10)]
    assert sum(r["support"] for r in rows) == s["test_samples"]
    assert all(0.0 <= r[key] <= 1.0 for r in rows for key in ("precision", "recall", "f1"))
    assert s["test_f1_macro"] == pytest.approx(sum(r["f1"] for r in rows) / len(rows))
    assert s["test_accuracy"] <= s["test_top5_accuracy"] <= 1.0


def test_with_ema_best_pt_takes_the_trained_weights_when_they_score_better(tmp_path, monkeypatch):
    """Each evaluation scores the EMA, then the trained weights, on validation, then test."""
    val = {"": [0.5, 0.6], "raw": [0.7, 0.55]}  # epoch 1: the trained weights win; epoch 2: nobody beats 0.7
    calls = {"n": 0}

    def fake(*args, **kwargs):
        epoch, slot = divmod(calls["n"], 4)
        calls["n"] += 1
        acc = [val[""][epoch], val["raw"][epoch], 0.5, 0.4][slot]
        return EvalResult(loss=1.0, accuracy=acc, f1_macro=acc, samples=10)

    monkeypatch.setattr(loop_module, "evaluate", fake)
    result = train(tiny_config(tmp_path / "run", **VAL, **{"run.epochs": 2, "optim.model_ema": 0.9}))
    s = result.summary
    assert s["best_checkpoint"]["weights"] == "raw" and s["best_checkpoint"]["val_accuracy"] == 0.7
    assert (s["test_accuracy"], s["raw_test_accuracy"]) == (0.5, 0.4)
    best = torch.load(result.folder / "best.pt", weights_only=True)
    epoch_1 = torch.load(next((result.folder / "checkpoints").glob("checkpoint-epoch0001-*.pt")), weights_only=True)
    for key, value in best.items():
        torch.testing.assert_close(value, epoch_1["model"][key], rtol=0, atol=0)  # the trained weights, not the EMA
    assert any(not torch.equal(best[k], epoch_1["techniques"]["ema"]["average"][k]) for k in best)
