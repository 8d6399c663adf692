"""How long training waited for data: ``data_wait_s`` per epoch, ``data_wait_s`` and
``data_wait_fraction`` in the summary, and the end-of-run advice when input-bound."""

from __future__ import annotations

import json
import time

import pytest
from conftest import tiny_config
from test_photos import write_photos

from quicktrain.cli import main
from quicktrain.data import photo_store
from quicktrain.engine import train
from quicktrain.engine.summary import INPUT_BOUND, input_bound_advice

FACTORY = """
import time
from torch import nn

class Slow(nn.Module):
    def __init__(self, inner, seconds):
        super().__init__()
        self.inner, self.seconds = inner, seconds

    def forward(self, x):
        time.sleep(self.seconds)  # a net whose step takes long: compute-bound
        return self.inner(x)

def fast(num_classes, image_size):
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, num_classes))

def slow(num_classes, image_size):
    return Slow(fast(num_classes, image_size), 0.3)
"""


@pytest.fixture
def slow_photos(tmp_path, monkeypatch):
    """A photo folder streamed through a decoder that takes 5 ms an image (in process)."""
    decode = photo_store.decode_photo

    def slow_decode(path, side):
        time.sleep(0.005)
        return decode(path, side)

    monkeypatch.setattr(photo_store, "decode_photo", slow_decode)
    (tmp_path / "nets.py").write_text(FACTORY)
    return write_photos(tmp_path / "photos", per_class=8)


def _cfg(tmp_path, folder, net, name):
    return tiny_config(
        tmp_path / name,
        **{
            "data.dataset": f"imagefolder:{folder}",
            "data.data_mode": "stream",
            "data.resolution": 32,
            "model.name": f"{tmp_path / 'nets.py'}:{net}",
            "run.epochs": 2,
            "run.batch_size": 8,
        },
    )


def test_a_data_bound_net_waits_more_than_a_compute_bound_one(tmp_path, slow_photos):
    data_bound = train(_cfg(tmp_path, slow_photos, "fast", "fast")).summary
    compute_bound = train(_cfg(tmp_path, slow_photos, "slow", "slow")).summary
    assert data_bound["data_wait_fraction"] > INPUT_BOUND > compute_bound["data_wait_fraction"] > 0
    assert 0 < data_bound["data_wait_s"] <= data_bound["train_time_s"]
    rows = [json.loads(line) for line in (tmp_path / "fast" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and sum(r["data_wait_s"] for r in rows) == pytest.approx(data_bound["data_wait_s"])
    assert input_bound_advice(compute_bound, 0) is None
    advice = input_bound_advice(data_bound, 0)
    assert advice.startswith("input-bound: training waited for the next batch") and "--workers, now 0" in advice
    assert "--data-mode memory" in advice  # streamed: the store is the thing to try


def test_the_cli_ends_an_input_bound_run_with_the_advice(tmp_path, slow_photos, capsys):
    argv = ["train", "--dataset", f"imagefolder:{slow_photos}", "--data-mode", "stream", "--resolution", "32"]
    argv += ["--model", f"{tmp_path / 'nets.py'}:fast", "--epochs", "1", "--batch-size", "8", "--no-progress"]
    assert main([*argv, "--no-tensorboard", "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "input-bound: training waited for the next batch" in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["data_wait_fraction"] > INPUT_BOUND
