"""Auto-augment policies and random erasing: timm's strings, deterministic per (seed, update,
position), the same in every arm."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config

import quicktrain.techniques.auto_augment as aa
from quicktrain import train
from quicktrain.errors import ConfigError
from quicktrain.techniques.auto_augment import AutoAugment, Policy, parse_policy


def test_timm_policy_strings_parse_and_bad_ones_name_what_is_accepted():
    assert parse_policy("rand-m9-mstd0.5") == Policy("rand", 9.0, 2, 0.5)
    assert parse_policy("rand-m7-n3") == Policy("rand", 7.0, 3, 0.0)
    assert parse_policy("trivial") == Policy("trivial")
    for bad in ("augmix-m5", "rand-m11", "rand-q3", "rand-m9-m8", "rand-n1.5"):
        with pytest.raises(ConfigError, match="auto_augment"):
            parse_policy(bad)


def _images(n=8):
    torch.manual_seed(0)
    return torch.randint(0, 256, (n, 3, 16, 16), dtype=torch.uint8), torch.arange(n)


@pytest.mark.parametrize("policy", ["rand-m9-mstd0.5", "trivial"])
def test_policies_are_a_function_of_seed_update_and_position(policy):
    x, y = _images()
    aug = AutoAugment(True, parse_policy(policy), 0.5, seed=1)
    a, b = aug.transform(x, y, 3)[0], aug.transform(x, y, 3)[0]
    assert torch.equal(a, b) and a.dtype == torch.uint8 and not torch.equal(a, x)
    assert not torch.equal(a, aug.transform(x, y, 4)[0])  # another update
    assert not torch.equal(a, AutoAugment(True, parse_policy(policy), 0.5, seed=2).transform(x, y, 3)[0])
    torch.manual_seed(123)
    before = torch.rand(1)
    aug.transform(x, y, 5)
    torch.manual_seed(123)
    assert torch.equal(torch.rand(1), before)  # the global generator is left alone
    assert torch.equal(x, _images()[0])  # the input batch is not changed in place


def test_random_erasing_fills_one_rectangle_per_chosen_image():
    x, y = _images(64)
    out = AutoAugment(True, None, 0.5, seed=0).transform(x, y, 0)[0]
    changed = (out != x).any(1)  # (B, H, W)
    erased = changed.flatten(1).any(1)
    assert 16 < int(erased.sum()) < 48  # about half of 64
    for mask in changed[erased]:
        rows, cols = mask.any(1).nonzero(), mask.any(0).nonzero()
        box = mask[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
        assert box.float().mean() > 0.9  # one rectangle (random bytes rarely equal the old ones)


def test_every_arm_trains_on_the_same_augmented_batches(tmp_path, monkeypatch):
    seen: dict[str, list] = {}
    real = AutoAugment.transform

    def recording(self, images, targets, update):
        out = real(self, images, targets, update)
        seen.setdefault(arm, []).append(out[0].clone())
        return out

    monkeypatch.setattr(aa.AutoAugment, "transform", recording)
    base = {"data.auto_augment": "rand-m9-mstd0.5", "data.reprob": 0.25, "run.epochs": 1, "run.batch_size": 32}
    for arm, extra in {"plain": {}, "ga": {"techniques.accum_steps": 4}}.items():
        summary = train(tiny_config(tmp_path / arm, **base, **extra)).summary
        assert summary["auto_augment"].startswith("RandAugment") and summary["reprob"] == 0.25
    assert len(seen["plain"]) == 3
    for a, b in zip(seen["plain"], seen["ga"], strict=True):
        assert torch.equal(a, b)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_policies_and_erasing_run_on_cuda_batches_deterministically():
    x, y = _images()
    aug = AutoAugment(True, parse_policy("rand-m9-mstd0.5"), 0.5, seed=1)
    a, b = aug.transform(x.cuda(), y.cuda(), 3)[0], aug.transform(x.cuda(), y.cuda(), 3)[0]
    assert a.is_cuda and a.dtype == torch.uint8 and torch.equal(a, b)
