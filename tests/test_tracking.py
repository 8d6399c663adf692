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
