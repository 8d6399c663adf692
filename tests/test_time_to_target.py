"""Time to target at update resolution, stop at target, and the training-time budget."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import tiny_config

from quicktrain.config import Config
from quicktrain.engine import loop as loop_module
from quicktrain.engine import train
from quicktrain.engine.checkpoint import list_checkpoints
from quicktrain.engine.evaluate import EvalResult
from quicktrain.errors import ConfigError

# 96 samples / batch 16 = 6 updates per epoch
SIX_PER_EPOCH = {"run.batch_size": 16, "run.epochs": 3}


class FakeClock:
    """A ``time`` module whose perf_counter advances 1 ms per reading, plus what ``sleep`` adds:
    timing assertions then hold on a machine of any speed or load."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.001
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def scripted_evaluate(
    monkeypatch: pytest.MonkeyPatch, accuracies: list[float], sleep: float = 0.0, clock: FakeClock | None = None
) -> list[int]:
    """Replace evaluation with a script of accuracies (the last repeats); returns the call log.
    Each evaluation takes ``sleep`` seconds (of ``clock`` when given, else real ones)."""
    calls: list[int] = []

    def fake(*args, **kwargs):
        (clock or time).sleep(sleep)
        acc = accuracies[min(len(calls), len(accuracies) - 1)]
        calls.append(len(calls))
        return EvalResult(loss=1.0, accuracy=acc, f1_macro=acc, samples=40)

    monkeypatch.setattr(loop_module, "evaluate", fake)
    return calls


def evals(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "evals.jsonl").read_text().splitlines()]


def test_stop_at_target_ends_at_the_first_qualifying_evaluation(tmp_path, monkeypatch):
    scripted_evaluate(monkeypatch, [0.1, 0.3, 0.55, 0.9])  # updates 2, 4, 6(end of epoch 1), 8, ...
    cfg = tiny_config(
        tmp_path / "run",
        **SIX_PER_EPOCH,
        **{"run.eval_every_steps": 2, "run.target_accuracy": 0.5, "run.stop_at_target": True},
    )
    s = train(cfg).summary
    assert s["status"] == "completed" and s["stopped_by"] == "target"
    assert s["reached_target"] is True
    assert s["updates_to_target"] == 6 == s["optimizer_updates"]  # not one update more
    assert s["epochs_to_target"] == pytest.approx(1.0)
    assert s["accuracy_at_target"] == pytest.approx(0.55) == s["test_accuracy"]
    rows = evals(tmp_path / "run")
    assert [r["updates"] for r in rows] == [2, 4, 6]
    assert s["time_to_target_s"] == pytest.approx(rows[-1]["train_time_s"])
    assert (tmp_path / "run" / "model.pt").is_file()


def test_stop_at_target_mid_epoch_checkpoints_the_position(tmp_path, monkeypatch):
    scripted_evaluate(monkeypatch, [0.1, 0.6])
    cfg = tiny_config(
        tmp_path / "run",
        **SIX_PER_EPOCH,
        **{"run.eval_every_steps": 2, "run.target_accuracy": 0.5, "run.stop_at_target": True},
    )
    s = train(cfg).summary
    assert s["updates_to_target"] == 4 == s["optimizer_updates"]
    assert s["epochs_to_target"] == pytest.approx(4 / 6, abs=1e-6)
    assert s["epochs_completed"] == 0 and s["stopped_by"] == "target"
    newest = list_checkpoints(tmp_path / "run" / "checkpoints")[-1]
    assert newest.name == "checkpoint-epoch0000-update000000004.pt"
    assert s["train_time_s"] == pytest.approx(s["time_to_target_s"])  # the partial epoch's training counts


def test_time_to_target_excludes_evaluation_time(tmp_path, monkeypatch):
    """Evaluations that take 1 s each never appear in the training clock."""
    from quicktrain.engine import trainer as trainer_module
    from quicktrain.metrics import timing as timing_module

    clock = FakeClock()  # training's and the wall's clock: 1 ms a reading, 1 s an evaluation
    monkeypatch.setattr(timing_module, "time", clock)
    monkeypatch.setattr(trainer_module, "time", clock)
    scripted_evaluate(monkeypatch, [0.1, 0.1, 0.1, 0.7], sleep=1.0, clock=clock)
    cfg = tiny_config(tmp_path / "run", **SIX_PER_EPOCH, **{"run.eval_every_steps": 2, "run.target_accuracy": 0.5})
    s = train(cfg).summary
    assert s["updates_to_target"] == 8 and s["stopped_by"] == "epochs"  # no stop asked: all 3 epochs
    rows = evals(tmp_path / "run")
    assert len(rows) == 9  # every 2 updates over 18
    assert s["wall_time_s"] - s["train_time_s"] >= 9 * 1.0
    assert s["time_to_target_s"] < 3 * 1.0  # three evaluations passed before the target
    assert s["time_to_target_s"] == pytest.approx(rows[3]["train_time_s"])
    times = [r["train_time_s"] for r in rows]
    assert times == sorted(times) and s["train_time_s"] == pytest.approx(times[-1])


def test_max_time_stops_at_an_update_boundary_with_a_complete_record(tmp_path, monkeypatch):
    # a training clock that advances one second per update makes the boundary exact
    monkeypatch.setattr(loop_module.Loop, "train_time", lambda self, sync=True: float(self.counters.num_updates))
    cfg = tiny_config(tmp_path / "run", **SIX_PER_EPOCH, **{"run.max_time": 3.5})
    result = train(cfg)
    s = result.summary
    assert s["status"] == "completed" and s["stopped_by"] == "max_time"
    assert s["optimizer_updates"] == 4 and s["max_time_s"] == 3.5
    assert s["test_accuracy"] is not None and s["final_eval_update"] == 4  # evaluated where it stopped
    assert list_checkpoints(tmp_path / "run" / "checkpoints")[-1].name.endswith("update000000004.pt")
    assert (tmp_path / "run" / "model.pt").is_file()


def test_max_time_at_an_epoch_end_stops_before_the_next_epoch(tmp_path, monkeypatch):
    monkeypatch.setattr(loop_module.Loop, "train_time", lambda self, sync=True: float(self.counters.num_updates))
    s = train(tiny_config(tmp_path / "run", **SIX_PER_EPOCH, **{"run.max_time": 6})).summary
    assert s["stopped_by"] == "max_time" and s["optimizer_updates"] == 6 and s["epochs_completed"] == 1


def test_stop_at_target_needs_a_target():
    with pytest.raises(ConfigError, match="stop_at_target needs run.target_accuracy"):
        Config.from_overrides({"run.stop_at_target": True})
    with pytest.raises(ConfigError, match="run.max_time=0"):
        Config.from_overrides({"run.max_time": 0})
