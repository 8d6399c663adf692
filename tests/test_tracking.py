"""MLflow beside TensorBoard: the same scalars, the config as params, the record as artifacts."""

from __future__ import annotations

import json

import pytest
from conftest import tiny_config

from quicktrain.engine import train
from quicktrain.errors import ConfigError


def test_the_mlflow_file_store_holds_the_metrics_params_and_record(tmp_path):
    store = tmp_path / "mlruns"
    result = train(tiny_config(tmp_path / "run", **{"run.epochs": 2, "run.batch_size": 8, "run.mlflow": str(store)}))
    (run,) = [p for p in (store / "0").iterdir() if p.is_dir()]
    values = [float(line.split()[1]) for line in (run / "metrics" / "epoch test_accuracy").read_text().splitlines()]
    assert values == [row["test_accuracy"] for row in result.history]
    assert len((run / "metrics" / "train loss").read_text().splitlines()) == 2  # every 10 of 24 updates
    assert (run / "params" / "optim.lr").read_text() == str(result.summary["lr"])
    saved = json.loads((run / "artifacts" / "summary.json").read_text())
    assert saved == json.loads((result.folder / "summary.json").read_text())


def test_an_unusable_tracking_uri_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError, match="run.mlflow="):
        train(tiny_config(tmp_path / "run", **{"run.mlflow": "nosuchscheme://x"}))


def test_a_wandb_offline_run_holds_the_config_and_the_scores(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")  # no account, no network
    monkeypatch.setenv("WANDB_SILENT", "true")
    result = train(tiny_config(tmp_path / "run", **{"run.batch_size": 8, "run.log_wandb": True}))
    (offline,) = (result.folder / "wandb").glob("offline-run-*")
    (events,) = offline.glob("run-*.wandb")  # offline, wandb keeps config, history and summary in this log
    data = events.read_bytes()
    assert b"test_vit" in data and b"label_smoothing" in data  # the config
    assert b"test_accuracy" in data and json.dumps(result.summary["test_accuracy"]).encode() in data  # the scores


def test_log_wandb_without_wandb_names_the_extra(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed: importing it raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'quicktrain\[wandb\]'"):
        train(tiny_config(tmp_path / "run", **{"run.log_wandb": True}))


def test_every_run_folder_has_summary_csv_one_row_per_epoch(tmp_path):
    import csv

    result = train(tiny_config(tmp_path / "run", **{"run.epochs": 3, "run.eval_every": 2}))
    with (result.folder / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]
    assert rows[0]["test_accuracy"] == "" and float(rows[2]["test_accuracy"]) == result.summary["test_accuracy"]
    assert [float(r["train_loss"]) for r in rows] == [row["train_loss"] for row in result.history]


def test_a_registered_tracker_is_started_and_finished_after_the_summary(tmp_path):
    from quicktrain.engine.tracking import Tracker, TrackerSpec, register_tracker, unregister_tracker

    events = []

    class Probe(Tracker):
        def finish(self, folder):
            events.append(("finish", (folder / "summary.json").is_file()))

        def close(self):
            events.append(("close", None))

    register_tracker(TrackerSpec("probe", "run.tensorboard", lambda cfg, trainer, opt, folder: Probe()))
    try:
        train(tiny_config(tmp_path / "on", **{"run.tensorboard": True}))
        train(tiny_config(tmp_path / "off"))  # tiny_config turns tensorboard (and so the probe) off
    finally:
        unregister_tracker("probe")
    assert events == [("finish", True), ("close", None)]
