"""Optimizers and schedules: decay groups, and schedules that count optimizer updates."""

from itertools import pairwise

import pytest
import torch

from quicktrain.config import OptimConfig
from quicktrain.engine.optim import build_optimizer, build_scheduler, param_groups
from quicktrain.models import create_model


def test_biases_and_norm_weights_are_not_decayed():
    model = create_model("test_resnet", num_classes=10)
    decay, no_decay = param_groups(model, 5e-4)
    assert decay["weight_decay"] == 5e-4 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim > 1 for p in decay["params"]) and all(p.ndim <= 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


@pytest.mark.parametrize(
    ("name", "cls"), [("sgd", torch.optim.SGD), ("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW)]
)
def test_optimizer_choice(name, cls):
    opt = build_optimizer(create_model("test_vit", num_classes=10), OptimConfig(optimizer=name, lr=0.01))
    assert isinstance(opt, cls)


def _lrs(cfg, total, per_epoch):
    opt = build_optimizer(torch.nn.Linear(2, 2), cfg)
    sched = build_scheduler(opt, cfg, total, per_epoch)
    lrs = []
    for _ in range(total):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


def test_onecycle_peaks_at_lr_after_30_percent_of_updates():
    lrs = _lrs(OptimConfig(lr=0.4, schedule="onecycle"), total=100, per_epoch=10)
    assert max(lrs) == pytest.approx(0.4, rel=1e-3)
    assert 25 <= lrs.index(max(lrs)) <= 31
    assert lrs[-1] < 0.01 * 0.4


def test_cosine_warms_up_then_decays():
    lrs = _lrs(OptimConfig(lr=1.0, schedule="cosine", warmup_epochs=1.0), total=50, per_epoch=10)
    assert lrs[0] < lrs[5] < lrs[9]  # linear warm-up over the first epoch's 10 updates
    assert lrs[10] == pytest.approx(1.0)
    assert lrs[-1] < 0.01
    assert all(a >= b for a, b in pairwise(lrs[10:]))


def test_constant_schedule():
    assert set(_lrs(OptimConfig(lr=0.3, schedule="constant"), total=5, per_epoch=5)) == {0.3}
