"""A short run on real CIFAR-10 images (the JPEG copy beside the repository)."""

import os
from pathlib import Path

import pytest
from conftest import CIFAR10_JPEG, tiny_config

from quicktrain.engine import train

DATA = Path(os.environ.get("QUICKTRAIN_CIFAR10_JPEG", CIFAR10_JPEG))


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "train").is_dir(), reason=f"real CIFAR-10 copy not found at {DATA}")
def test_short_real_cifar10_run_is_clearly_above_chance(tmp_path):
    cfg = tiny_config(
        tmp_path / "run",
        **{
            "data.dataset": f"imagefolder:{DATA}",
            "data.max_train_samples": 2000,
            "data.max_test_samples": 500,
            "model.name": "test_resnet",
            "run.epochs": 3,
            "run.batch_size": 64,
            "optim.lr": 0.2,
            "techniques.amp": "auto",
        },
    )
    result = train(cfg)
    assert result.summary["train_samples"] == 2000 and result.summary["test_samples"] == 500
    assert result.summary["test_accuracy"] > 0.25, result.history  # chance: 0.10
    assert result.summary["test_f1_macro"] > 0.15
