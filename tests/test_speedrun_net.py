"""The speedrun net: it trains, and its whitening stem decorrelates input patches."""

from __future__ import annotations

import torch
from conftest import tiny_config

from quicktrain.engine.trainer import train
from quicktrain.models import create_model
from quicktrain.models.speedrun import SpeedrunNet


def _patches(images: torch.Tensor) -> torch.Tensor:
    p = images.unfold(2, 2, 1).unfold(3, 2, 1).permute(0, 2, 3, 1, 4, 5).reshape(-1, 12)
    return p - p.mean(0)


def test_whitening_init_decorrelates_input_patches() -> None:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(64, 1, 16, 16, generator=g)
    noise = [torch.randn(64, 1, 16, 16, generator=g) for _ in range(2)]
    images = torch.cat([base, 0.8 * base + 0.2 * noise[0], 0.5 * base + 0.3 * noise[1]], 1)
    cov_in = _patches(images).T @ _patches(images) / len(_patches(images))
    off = cov_in - torch.diag(torch.diag(cov_in))
    assert off.abs().max() > 0.3  # strongly correlated channels and neighbours

    net = SpeedrunNet()
    net.init_from_data(images, eps=1e-6)  # eps only guards against zero eigenvalues
    out = torch.nn.functional.conv2d(images, net.whiten.weight[:12])  # the 12 filters (the other 12 negate them)
    flat = out.permute(0, 2, 3, 1).reshape(-1, 12)
    flat = flat - flat.mean(0)
    cov_out = flat.T @ flat / len(flat)
    torch.testing.assert_close(cov_out, torch.eye(12), atol=0.02, rtol=0)  # decorrelated, unit variance
    assert torch.equal(net.whiten.weight[12:], -net.whiten.weight[:12])
    assert not net.whiten.weight.requires_grad


def test_groups_start_near_identity_and_norm_scales_are_fixed() -> None:
    net = SpeedrunNet()
    first = net.body[1][0]  # the first group's first conv: 24 -> 64 channels
    x = torch.randn(2, 24, 8, 8)
    torch.testing.assert_close(first(x)[:, :24], x)  # Dirac init: channel i passes input channel i
    norms = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(norms) == 6
    assert all(not m.weight.requires_grad and m.bias.requires_grad for m in norms)
    assert not any(p.requires_grad for p in net.whiten.parameters())


def test_speedrun_net_trains_a_few_steps_and_is_registered(tmp_path) -> None:
    assert isinstance(create_model("speedrun_net", 10), SpeedrunNet)
    result = train(tiny_config(tmp_path, **{"model.name": "speedrun_net", "run.epochs": 1, "optim.lr": 0.05}))
    s = result.summary
    assert s["status"] == "completed" and s["optimizer_updates"] == 3 and 1e6 < s["num_params"] < 3e6
