"""Per-dataset normalisation: statistics from the training split, exact, cached, recorded."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import tiny_config
from PIL import Image

from quicktrain.config import Config
from quicktrain.data.prepare import IMAGENET_MEAN
from quicktrain.data.stats import cached_channel_stats, channel_stats
from quicktrain.engine import train
from quicktrain.engine.setup import build_run, resolve_normalization
from quicktrain.errors import ConfigError


def test_channel_stats_match_a_float_computation():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(37, 5, 7, 3), dtype=np.uint8)
    mean, std = channel_stats(images, chunk=8)  # chunks that do not divide the set
    as_float = images.reshape(-1, 3).astype(np.float64) / 255
    np.testing.assert_allclose(mean, as_float.mean(0), atol=1e-6)
    np.testing.assert_allclose(std, as_float.std(0), atol=1e-6)


def test_known_statistics_and_a_constant_channel():
    images = np.zeros((4, 2, 2, 3), dtype=np.uint8)
    images[:2, ..., 0] = 255  # channel 0: half 0, half 255 -> mean 0.5, std 0.5
    images[..., 1] = 51  # channel 1: constant 0.2 -> centred, not divided by zero
    mean, std = channel_stats(images)
    assert mean == pytest.approx((0.5, 0.2, 0.0)) and std == pytest.approx((0.5, 1.0, 1.0))


def test_statistics_are_cached(tmp_path, monkeypatch):
    images = np.full((3, 2, 2, 3), 128, dtype=np.uint8)
    first = cached_channel_stats(images, "x", str(tmp_path))
    monkeypatch.setattr("quicktrain.data.stats.channel_stats", lambda *a: pytest.fail("computed twice"))
    assert cached_channel_stats(images, "x", str(tmp_path)) == first


def _grayscale_folder(root, values=(0, 100, 200)):
    """Grayscale PNGs (mode L): class k is a flat image of values[k]."""
    for split in ("train", "test"):
        for k, value in enumerate(values):
            folder = root / split / f"c{k}"
            folder.mkdir(parents=True)
            for i in range(2):
                Image.fromarray(np.full((8, 8), value, dtype=np.uint8), mode="L").save(folder / f"{i}.png")


def test_a_grayscale_folder_gets_its_own_statistics_in_every_channel(tmp_path):
    _grayscale_folder(tmp_path / "digits")
    cfg = tiny_config(tmp_path / "run", **{"data.dataset": f"imagefolder:{tmp_path / 'digits'}", "data.resolution": 8})
    cfg = Config.from_overrides({"data.max_train_samples": None, "data.max_test_samples": None}, cfg)
    run = build_run(cfg, progress=False)
    values = np.array([0, 100, 200]) / 255
    assert run.normalization.source == "training split"
    assert run.normalization.mean == pytest.approx((values.mean(),) * 3, abs=1e-6)
    assert run.normalization.std == pytest.approx((values.std(),) * 3, abs=1e-6)


def test_given_and_imagenet_statistics_take_precedence_and_are_recorded(tmp_path):
    given = train(tiny_config(tmp_path / "given", **{"data.mean": [0.5], "data.std": [0.25]}))
    assert given.summary["normalization"] == {"mean": [0.5] * 3, "std": [0.25] * 3, "source": "given"}
    own = train(tiny_config(tmp_path / "own"))
    assert own.summary["normalization"]["source"] == "training split"
    assert json.loads((own.folder / "summary.json").read_text())["normalization"] == own.summary["normalization"]
    # ImageNet weights saw ImageNet statistics (checked without downloading them)
    arrays = build_run(tiny_config(tmp_path / "plain"), progress=False).arrays
    hub_cfg = Config.from_overrides({"model.pretrained": "hub"}, tiny_config(tmp_path / "hub"))
    assert resolve_normalization(hub_cfg, arrays).mean == IMAGENET_MEAN


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"data.mean": [0.5, 0.5]}, "must have 1 value"),
        ({"data.mean": [0.5]}, "go together"),
        ({"data.mean": [0.5], "data.std": [0.0]}, "must be positive"),
    ],
)
def test_bad_statistics_are_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        Config.from_overrides(overrides)
