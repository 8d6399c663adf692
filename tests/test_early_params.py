"""Parameters trained for the first epochs only (airbench's whitening bias): which ones, when
they train, that they stay put afterwards, and the errors for a bad choice."""

import itertools

import pytest
import torch
from conftest import tiny_config
from torch import nn

from quicktrain.config import Config
from quicktrain.engine import train
from quicktrain.engine.step import train_step
from quicktrain.errors import ConfigError
from quicktrain.techniques.early_params import EarlyParams


def _model() -> nn.Module:
    model = nn.Sequential(nn.Conv2d(3, 4, 2), nn.Conv2d(4, 4, 3))
    model[0].requires_grad_(False)  # a fixed stem, as speedrun_net's whitening layer
    return model


def test_chosen_by_name_trainable_in_the_first_epochs_then_fixed():
    model = _model()
    early = EarlyParams.select(model, "0.bias", 2)
    assert early.active and list(early.params) == ["0.bias"]
    assert model[0].bias.requires_grad and not model[0].weight.requires_grad  # opened for the optimizer
    states = []
    for epoch in range(4):
        early.set_epoch(epoch)
        states.append(model[0].bias.requires_grad)
    assert states == [True, True, False, False]
    assert model[1].weight.requires_grad  # the others untouched


def test_off_touches_nothing():
    model = _model()
    early = EarlyParams.select(model, None, 0)
    early.set_epoch(0)
    assert not early.active and not model[0].bias.requires_grad


def test_a_pattern_that_matches_nothing_names_the_parameters():
    with pytest.raises(ConfigError, match=r"early_params='stem\.\*' matches no parameter .*0\.weight"):
        EarlyParams.select(_model(), "stem.*", 3)


def test_pattern_and_epochs_go_together():
    with pytest.raises(ConfigError, match="go together"):
        Config.from_overrides({"optim.early_params": "whiten.bias"})
    with pytest.raises(ConfigError, match="go together"):
        Config.from_overrides({"optim.early_epochs": 3})
    with pytest.raises(ConfigError, match="early_epochs=-1 must be zero or positive"):
        Config.from_overrides({"optim.early_params": "whiten.bias", "optim.early_epochs": -1})


def test_the_whitening_bias_learns_in_the_first_epoch_only(tmp_path, monkeypatch):
    """speedrun_net freezes its whitening layer; opened for one epoch, its bias moves with every
    update of that epoch and not after (96 images / 32: 3 updates per epoch)."""
    biases = []

    def spy(state, batch):
        biases.append(dict(state.model.named_parameters())["whiten.bias"].detach().clone())
        return train_step(state, batch)

    monkeypatch.setattr("quicktrain.engine.oom.train_step", spy)
    cfg = tiny_config(
        tmp_path,
        **{"model.name": "speedrun_net", "run.epochs": 3, "optim.early_params": "whiten.bias", "optim.early_epochs": 1},
    )
    assert train(cfg).summary["status"] == "completed"
    assert len(biases) == 9 and torch.count_nonzero(biases[0]) == 0  # fitted with a zero bias
    assert all(not torch.equal(a, b) for a, b in itertools.pairwise(biases[:4]))  # the first epoch's updates move it
    assert all(torch.equal(biases[3], b) for b in biases[4:])  # then it stays
