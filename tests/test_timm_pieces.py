"""Where timm already has the piece: EMA is timm's ``ModelEmaV3``; MixUp/CutMix stays quicktrain's
for the two reasons these tests show (``techniques/mixing.py`` says them at its top)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from timm.data import Mixup
from timm.utils.model_ema import ModelEmaV3
from torch import nn

from quicktrain.techniques.ema import ModelEma, ema_decay
from quicktrain.techniques.mixing import draw, mix_batch


def test_the_documented_decay_rule_is_timms() -> None:
    probe = ModelEmaV3(nn.Linear(2, 2), decay=0.999, use_warmup=True)
    plain = ModelEmaV3(nn.Linear(2, 2), decay=0.999, use_warmup=False)
    for update in (1, 2, 3, 10, 1000, 10**6):
        assert ema_decay(update, 0.999) == pytest.approx(probe.get_decay(update))
        assert ema_decay(update, 0.999, warmup=False) == pytest.approx(plain.get_decay(update))


def test_the_technique_averages_through_timm_and_keeps_a_plain_state_dict() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    ema = ModelEma(True, 0.5, warmup=False).settle(model, None, 0, 0, torch.device("cpu"))
    assert isinstance(ema.average, ModelEmaV3) and ema.scored_model(model) is ema.average.module
    before = {k: v.clone() for k, v in ema.average.module.state_dict().items()}
    with torch.no_grad():
        model[0].weight.add_(1.0)
    ema.after_update(model, 1)  # the first update: the average becomes the weights
    ema.after_update(model, 2)  # decay 0.5 from there on: still the weights, they did not move
    assert torch.allclose(ema.average.module[0].weight, model[0].weight)
    assert not torch.equal(before["0.weight"], ema.average.module[0].weight)
    assert set(ema.state_dict()["average"]) == set(model.state_dict())  # no "module." prefix


def test_timms_mixup_follows_numpys_global_generator_and_ours_does_not() -> None:
    x, y = torch.rand(4, 3, 8, 8), torch.tensor([0, 1, 2, 3])
    mixup = Mixup(mixup_alpha=1.0, cutmix_alpha=0.0, prob=1.0, num_classes=4)
    np.random.seed(0)
    first = mixup(x.clone(), y)[0]
    np.random.seed(0)
    np.random.random()  # anything else drawing from the global generator in between
    second = mixup(x.clone(), y)[0]
    assert not torch.allclose(first, second)  # same update, different mix
    ours = [mix_batch(x.clone(), y, draw(0, 5, 1.0, 0.0, 1.0, 0.5, (8, 8)), 4)[0] for _ in range(2)]
    np.random.random()
    assert torch.equal(ours[0], ours[1])  # a function of (seed, update) alone


def test_timms_mixup_refuses_an_odd_batch_and_ours_mixes_it() -> None:
    x, y = torch.rand(3, 3, 8, 8), torch.tensor([0, 1, 2])
    with pytest.raises(AssertionError, match="even"):
        Mixup(mixup_alpha=1.0, num_classes=3)(x, y)
    mixed, targets = mix_batch(x, y, draw(0, 0, 1.0, 0.0, 1.0, 0.5, (8, 8)), 3)
    assert mixed.shape == x.shape and torch.allclose(targets.sum(dim=1), torch.ones(3))
