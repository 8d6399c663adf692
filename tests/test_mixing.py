"""MixUp/CutMix: soft targets that sum to one, the mixed images, the same batches in every arm."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tiny_config

import quicktrain.techniques.mixing as mixing
from quicktrain import train
from quicktrain.techniques.mixing import Draw, draw, mix_batch


def _batch(n=6, classes=5):
    torch.manual_seed(0)
    return torch.randint(0, 256, (n, 3, 8, 8), dtype=torch.uint8), torch.arange(n) % classes


def test_mixup_blends_images_and_targets_with_the_reversed_batch():
    x, y = _batch()
    mixed, targets = mix_batch(x, y, Draw("mixup", 0.7), 5)
    torch.testing.assert_close(mixed, 0.7 * x.float() + 0.3 * x.flip(0).float())
    torch.testing.assert_close(targets.sum(1), torch.ones(6))
    assert targets[0, y[0]] == pytest.approx(0.7 + (0.3 if y[0] == y[-1] else 0)) and targets[0, y[-1]] >= 0.3


def test_cutmix_pastes_the_box_and_weights_targets_by_the_area_kept():
    x, y = _batch()
    d = draw(0, 3, 0.0, 1.0, 1.0, 0.5, (8, 8))
    assert d.kind == "cutmix"
    top, bottom, left, right = d.box
    assert d.lam == pytest.approx(1 - (bottom - top) * (right - left) / 64)
    mixed, targets = mix_batch(x, y, d, 5)
    assert mixed.dtype == torch.uint8
    assert torch.equal(mixed[..., top:bottom, left:right], x.flip(0)[..., top:bottom, left:right])
    outside = torch.ones(8, 8, dtype=torch.bool)
    outside[top:bottom, left:right] = False
    assert torch.equal(mixed[..., outside], x[..., outside])
    torch.testing.assert_close(targets.sum(1), torch.ones(6))


def test_draws_are_a_function_of_seed_and_update():
    args = (0.8, 1.0, 0.9, 0.5, (32, 32))
    runs = [[draw(seed, u, *args) for u in range(40)] for seed in (0, 0, 1)]
    assert runs[0] == runs[1] and runs[0] != runs[2]
    kinds = {d.kind for d in runs[0]}
    assert kinds == {None, "mixup", "cutmix"}  # prob 0.9 and switch 0.5 over 40 updates
    lams = np.array([d.lam for d in runs[0] if d.kind == "mixup"])
    assert ((0 < lams) & (lams < 1)).all()


def test_soft_targets_with_label_smoothing_are_smoothed_probabilities():
    logits, targets = torch.randn(4, 5), torch.softmax(torch.randn(4, 5), 1)
    loss = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(logits, targets)
    smoothed = targets * 0.9 + 0.1 / 5
    torch.testing.assert_close(loss, -(smoothed * logits.log_softmax(1)).sum(1).mean())


def test_every_arm_trains_on_the_same_mixed_batches(tmp_path, monkeypatch):
    """Accumulation and memory layout change how the window is split and laid out, never the mix."""
    seen: dict[str, list] = {}
    real = mixing.mix_batch

    def recording(images, labels, d, classes):
        out = real(images, labels, d, classes)
        seen.setdefault(arm, []).append((d, out[0].float().clone(), out[1].clone()))
        return out

    monkeypatch.setattr(mixing, "mix_batch", recording)
    base = {"data.mixup": 0.8, "data.cutmix": 1.0, "data.mixup_prob": 0.8, "run.epochs": 2, "run.batch_size": 32}
    for arm, extra in {
        "plain": {},
        "ga": {"techniques.accum_steps": 4},
        "nhwc": {"techniques.channels_last": True},
    }.items():
        result = train(tiny_config(tmp_path / arm, **base, **extra))
        assert result.summary["mixup"] == 0.8 and result.summary["cutmix"] == 1.0
    plain = seen["plain"]
    assert len(plain) == 6 and {d.kind for d, *_ in plain} - {None}  # 3 updates x 2 epochs, some mixed
    for other in ("ga", "nhwc"):
        for (d1, x1, t1), (d2, x2, t2) in zip(plain, seen[other], strict=True):
            assert d1 == d2
            torch.testing.assert_close(x1, x2, rtol=0, atol=0)
            torch.testing.assert_close(t1, t2, rtol=0, atol=0)
