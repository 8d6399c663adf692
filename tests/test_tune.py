"""`quicktrain tune`: validation split, Optuna study, best.yaml, resumption, pruning, failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from quicktrain.cli import main
from quicktrain.config import Config, DataConfig
from quicktrain.data.arrays import Split, carve_validation
from quicktrain.data.sources import load_arrays
from quicktrain.experiments.space import DEFAULT_SPACE, check_space
from quicktrain.experiments.tune import TuneSpec, finished_trials, open_study, run_tune

optuna = pytest.importorskip("optuna")

BASE = {
    "data.dataset": "synthetic",
    "data.max_train_samples": 320,
    "data.max_test_samples": 20,
    "data.val_fraction": 0.25,
    "model.name": "test_vit",
    "optim.optimizer": "adam",
    "optim.schedule": "constant",
    "run.epochs": 2,
    "run.batch_size": 32,
    "run.tensorboard": False,
}
LR_ONLY = {"optim.lr": {"type": "float", "low": 1e-6, "high": 1e6, "log": True}}


def spec_for(out: Path, trials: int, space: dict | None = None, pruner: str = "median", **base: object) -> TuneSpec:
    cfg = Config.from_overrides({**BASE, **base})
    return TuneSpec(cfg, trials, "test", None, out, space or DEFAULT_SPACE, pruner=pruner)


def test_validation_split_is_disjoint_balanced_and_seeded() -> None:
    n = 200
    images = np.zeros((n, 2, 2, 3), np.uint8)
    images[:, 0, 0, 0] = np.arange(n)  # each image says its index
    labels = np.arange(n) % 10
    rest, val = carve_validation(Split(images, labels), 0.2, seed=3)
    seen_rest, seen_val = set(rest.images[:, 0, 0, 0]), set(val.images[:, 0, 0, 0])
    assert not seen_rest & seen_val and len(seen_rest | seen_val) == n
    assert np.bincount(val.labels).tolist() == [4] * 10
    again, _ = carve_validation(Split(images, labels), 0.2, seed=3)
    other, _ = carve_validation(Split(images, labels), 0.2, seed=4)
    assert np.array_equal(again.images, rest.images) and not np.array_equal(other.images, rest.images)


def test_load_arrays_carves_validation_and_can_skip_test() -> None:
    arrays = load_arrays(DataConfig(dataset="synthetic", max_train_samples=100, val_fraction=0.1, load_test=False))
    assert len(arrays.train) == 90 and len(arrays.val) == 10 and arrays.test is None


def test_search_space_errors_name_the_key() -> None:
    from quicktrain.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown config key 'optim.lrr'"):
        check_space({"optim.lrr": {"type": "float", "low": 0.1, "high": 1}})
    with pytest.raises(ConfigError, match="optim.lr is log-uniform"):
        check_space({"optim.lr": {"type": "float", "low": 0, "high": 1, "log": True}})


@pytest.mark.slow
def test_four_trials_write_best_yaml_that_trains(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    run_tune(spec_for(out, 4, pruner="none"))
    study = open_study(spec_for(out, 4))
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 4
    for t in study.trials:  # every trial's own run record, scored on validation only
        summary = json.loads((Path(t.user_attrs["run"]) / "summary.json").read_text())
        assert summary["val_accuracy"] == pytest.approx(t.value) and summary["test_samples"] == 0
    for name in ("trials.csv", "best.yaml", "history.png", "tune.json"):
        assert (out / name).is_file()
    best = max(study.trials, key=lambda t: t.value)
    assert main(["train", "--config", str(out / "best.yaml"), "--out", str(tmp_path / "final"), "--no-progress"]) == 0
    used = yaml.safe_load((tmp_path / "final" / "config.yaml").read_text())
    assert used["optim"]["optimizer"] == best.params["optim.optimizer"]
    assert used["optim"]["lr"] == pytest.approx(best.params["optim.lr"])
    assert used["data"]["load_test"] is True  # the final run is evaluated on the test split


def _image_folder(root: Path, broken_test: bool) -> None:
    rng = np.random.default_rng(0)
    for split, n in (("train", 8), ("test", 2)):
        for c in range(2):
            folder = root / split / f"class{c}"
            folder.mkdir(parents=True)
            for i in range(n):
                if split == "test" and broken_test:
                    (folder / f"{i}.png").write_bytes(b"not an image")
                else:
                    pixels = rng.integers(0, 255, (8, 8, 3), dtype=np.uint8) // (c + 1)
                    Image.fromarray(pixels).save(folder / f"{i}.png")


@pytest.mark.slow
def test_tuning_never_loads_the_test_split(tmp_path: Path) -> None:
    _image_folder(tmp_path / "data", broken_test=True)  # decoding any test image would fail
    spec = spec_for(
        tmp_path / "tune", 2, LR_ONLY, **{"data.dataset": f"imagefolder:{tmp_path / 'data'}", "data.resolution": 8}
    )
    run_tune(spec)
    study = open_study(spec)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    # the same data with the test split read does fail: the broken files are really there
    assert main(["train", "--dataset", f"imagefolder:{tmp_path / 'data'}", "--resolution", "8", "--model",
                 "test_vit", "--out", str(tmp_path / "x"), "--no-progress"]) == 2  # fmt: skip


@pytest.mark.slow
def test_pruned_and_diverging_trials_are_recorded_and_the_study_goes_on(tmp_path: Path) -> None:
    space = {**LR_ONLY, "optim.optimizer": {"type": "categorical", "choices": ["adam", "sgd"]}}
    spec = spec_for(tmp_path / "tune", 5, space)
    study = open_study(spec)
    # good, good, learns nothing (pruned after epoch 1), diverges (NaN loss), good
    for opt, lr in (("adam", 0.01), ("adam", 0.003), ("adam", 1e-6), ("sgd", 1e5), ("adam", 0.01)):
        study.enqueue_trial({"optim.lr": lr, "optim.optimizer": opt})
    run_tune(spec)
    states = [t.state.name for t in open_study(spec).trials]
    assert states == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL", "COMPLETE"]
    failed = open_study(spec).trials[3]
    assert "diverged" in failed.user_attrs["error"]
    pruned_record = json.loads((Path(open_study(spec).trials[2].user_attrs["run"]) / "summary.json").read_text())
    assert pruned_record["status"] == "pruned" and pruned_record["epochs_completed"] == 1
    csv_text = (tmp_path / "tune" / "trials.csv").read_text()
    assert "PRUNED" in csv_text and "TrainingError: training diverged" in csv_text


@pytest.mark.slow
def test_a_killed_study_resumes_to_the_asked_number_of_trials(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    flags = [a for k, v in BASE.items() for a in (f"{k}={v}",)]
    command = [
        sys.executable,
        "-m",
        "quicktrain",
        "tune",
        *flags,
        "--trials",
        "4",
        "--study",
        "test",
        "--out",
        str(out),
        "--epochs",
        "6",
        "--pruner",
        "none",
    ]  # trials of a few seconds
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    spec = spec_for(out, 4, pruner="none", **{"run.epochs": 6})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.2)
        # read the trial folders, not the database: opening it while the worker creates its
        # tables would race with it. Trials run one after another and a trial's number is
        # given after the previous one is told to the study, so a third folder means two
        # recorded outcomes (a second summary.json alone does not: it is written before)
        if (out / "trials" / "trial_0002").exists():
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(finished_trials(open_study(spec)))
    assert 2 <= done_before < 4
    assert subprocess.run(command, capture_output=True, check=False).returncode == 0  # the same command
    assert len(finished_trials(open_study(spec))) == 4
    rows = (out / "trials.csv").read_text().splitlines()[1:]
    assert sum(",COMPLETE," in r or ",PRUNED," in r for r in rows) == 4  # no outcome counted twice or lost


def test_tune_without_optuna_names_the_extra(monkeypatch, capsys) -> None:
    import sys

    from quicktrain.cli import main

    monkeypatch.setitem(sys.modules, "optuna", None)  # as if not installed: importing it raises ImportError
    assert main(["tune", "--trials", "1", "--dataset", "synthetic", "--model", "test_vit", "--out", "x"]) == 2
    assert capsys.readouterr().err.strip().endswith("quicktrain tune needs Optuna: pip install 'quicktrain[tune]'")
