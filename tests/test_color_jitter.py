"""Colour jitter (data.brightness / data.contrast): the normalised-space formula on hand-made
pixels, per-image draws from (seed, epoch), both loaders yielding the same bytes, config checks."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from conftest import tiny_config

from quicktrain.cli import main
from quicktrain.config import Config, ConfigError, DataConfig
from quicktrain.data.augment import AugmentSpec, CropFlip, color_jitter
from quicktrain.data.device_loader import DeviceLoader
from quicktrain.data.loader import make_loader, order_fingerprint
from quicktrain.data.sources import load_arrays
from quicktrain.engine.setup import build_run

CPU = torch.device("cpu")
SPEC = AugmentSpec(pad=2, brightness=0.14, contrast=0.13, mean=(0.5, 0.4, 0.3), std=(0.25, 0.2, 0.1))


def test_jitter_is_the_shift_and_scale_of_the_normalised_image_rounded_to_pixels() -> None:
    images = np.array([[[[0, 100, 255]]], [[[128, 128, 128]]]], dtype=np.uint8)  # (2, 1, 1, 3)
    shift, scale = np.array([0.1, -0.2], dtype=np.float32), np.array([1.1, 0.9], dtype=np.float32)
    out = color_jitter(images, shift, scale, SPEC)
    mean, std = np.array(SPEC.mean) * 255, np.array(SPEC.std) * 255
    normalised = (images.astype(np.float64) - mean) / std
    expected = ((normalised + shift[:, None, None, None]) * scale[:, None, None, None]) * std + mean
    np.testing.assert_array_equal(out, np.clip(np.rint(expected), 0, 255).astype(np.uint8))
    assert out[0, 0, 0, 2] == 255  # clipped, not wrapped round
    neutral = color_jitter(images, np.zeros(2, np.float32), np.ones(2, np.float32), SPEC)
    np.testing.assert_array_equal(neutral, images)  # b = 0, c = 1 leaves every pixel alone


def test_draws_are_per_image_in_range_and_only_when_asked() -> None:
    p = CropFlip.draw(5000, seed=0, epoch=0, spec=SPEC)
    assert p.shift.dtype == p.scale.dtype == np.float32
    assert -0.14 <= p.shift.min() < -0.13 and 0.13 < p.shift.max() <= 0.14
    assert 0.87 <= p.scale.min() < 0.88 and 1.12 < p.scale.max() <= 1.13
    assert abs(np.corrcoef(p.shift, p.scale)[0, 1]) < 0.05  # drawn independently
    again, next_epoch = CropFlip.draw(5000, 0, 0, SPEC), CropFlip.draw(5000, 0, 1, SPEC)
    assert np.array_equal(p.shift, again.shift) and not np.array_equal(p.shift, next_epoch.shift)
    plain = CropFlip.draw(5000, seed=0, epoch=0, spec=AugmentSpec(pad=2))
    assert plain.shift is None and set(plain.arrays()) == {"dy", "dx", "flip"}
    assert np.array_equal(plain.dy, p.dy) and np.array_equal(plain.flip, p.flip)  # crops untouched by jitter


def test_both_loaders_yield_the_same_jittered_bytes() -> None:
    split = load_arrays(DataConfig(dataset="synthetic", max_train_samples=50)).train
    device = DeviceLoader(split, 16, seed=3, device=CPU, spec=SPEC)
    host = make_loader(split, 16, True, seed=3, spec=SPEC)
    plain = DeviceLoader(split, 16, seed=3, device=CPU, spec=AugmentSpec(pad=2))
    changed = 0
    for (xd, yd), (xh, yh), (xp, _) in zip(device, host, plain):
        assert torch.equal(xd, xh) and torch.equal(yd, yh)
        changed += int((xd != xp).flatten(1).any(1).sum())
    assert changed >= 45  # nearly every image altered (a draw close to b = 0, c = 1 may leave one be)
    assert order_fingerprint(50, 3, 1, True, SPEC) != order_fingerprint(50, 3, 1, True, AugmentSpec(pad=2))


def test_a_run_with_jitter_trains_on_other_inputs_and_says_so(tmp_path, capsys) -> None:
    tiny = ["--dataset", "synthetic", "--max-train-samples", "32", "--max-test-samples", "8", "--epochs", "1"]
    tiny += ["--amp", "off", "--no-tensorboard", "--no-progress", "--loader", "device", "--crop-pad", "2"]
    assert main(["train", *tiny, "--brightness", "0.14", "--contrast", "0.13", "--out", str(tmp_path / "on")]) == 0
    out = capsys.readouterr().out
    jitter = "colour jitter (brightness 0.14, contrast 0.13)"
    assert f"augment       random crop (padding 2, zero), random flip, {jitter}\n" in out
    assert main(["train", *tiny, "--out", str(tmp_path / "off")]) == 0
    on, off = (json.loads((tmp_path / name / "summary.json").read_text()) for name in ("on", "off"))
    assert on["data_order"] != off["data_order"]
    losses = [json.loads((tmp_path / name / "metrics.jsonl").read_text().splitlines()[0]) for name in ("on", "off")]
    assert losses[0]["train_loss"] != losses[1]["train_loss"]  # the model saw other pixels


@pytest.mark.parametrize("loader", ["device", "torch"])
def test_a_run_jitters_in_its_own_normalisation(tmp_path, loader: str) -> None:
    cfg = tiny_config(tmp_path, **{"data.brightness": 0.1, "data.contrast": 0.1, "data.loader": loader})
    run = build_run(cfg, progress=False)
    spec = run.train_loader.spec if loader == "device" else run.train_loader.dataset.spec
    assert (spec.mean, spec.std) == (run.normalization.mean, run.normalization.std)
    assert spec.mean != AugmentSpec().mean  # the training split's statistics, not the placeholder
    assert (spec.brightness, spec.contrast) == (0.1, 0.1)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("data.brightness", -0.1, "data.brightness=-0.1 must be zero or positive"),
        ("data.contrast", 1.0, "data.contrast=1.0 must be in [0, 1)"),
        ("data.contrast", -0.2, "data.contrast=-0.2 must be in [0, 1)"),
    ],
)
def test_bad_jitter_values_are_refused_naming_the_value(key: str, value: float, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Config.from_overrides({key: value})
