"""Optimizers and schedules: decay groups, and schedules that count optimizer updates."""

from itertools import pairwise

import pytest
import torch

from quicktrain.config import OptimConfig
from quicktrain.engine.optim import build_optimizer, build_scheduler, param_groups, triangle
from quicktrain.models import create_model


def test_biases_and_norm_weights_are_not_decayed():
    model = create_model("test_resnet", num_classes=10)
    decay, no_decay = param_groups(model, 5e-4, lr=0.1)
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


def test_norm_shifts_get_the_larger_step_and_frozen_scales_are_left_out():
    model = create_model("speedrun_net", num_classes=10)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    groups = param_groups(model, 5e-4, lr=0.1, norm_bias_lr_scale=64)
    assert [g["lr"] for g in groups] == pytest.approx([0.1, 6.4])  # no other undecayed parameters here
    assert {id(p) for p in groups[-1]["params"]} == {id(m.bias) for m in norms}
    assert groups[-1]["weight_decay"] == 0.0
    grouped = {id(p) for g in groups for p in g["params"]}
    assert not grouped & {id(m.weight) for m in norms}  # BatchNorm scales are frozen in this model
    assert grouped == {id(p) for p in model.parameters() if p.requires_grad}


@pytest.mark.parametrize("schedule", ["onecycle", "triangle", "cosine", "linear"])
def test_every_schedule_keeps_the_norm_shifts_step_ratio(schedule):
    cfg = OptimConfig(lr=0.2, schedule=schedule, norm_bias_lr_scale=64)
    opt = build_optimizer(create_model("speedrun_net", num_classes=10), cfg)
    sched = build_scheduler(opt, cfg, total_updates=20, updates_per_epoch=5)
    for _ in range(20):
        assert opt.param_groups[-1]["lr"] == pytest.approx(64 * opt.param_groups[0]["lr"])
        opt.step()
        sched.step()


def test_triangle_rises_to_the_peak_at_23_percent_then_falls_to_7_percent():
    lrs = _lrs(OptimConfig(lr=2.0, schedule="triangle"), total=101, per_epoch=10)
    assert lrs[0] == pytest.approx(0.4)
    assert max(lrs) == pytest.approx(2.0) and lrs.index(max(lrs)) == 23
    assert all(a < b for a, b in pairwise(lrs[:24])) and all(a > b for a, b in pairwise(lrs[23:]))
    assert triangle(101, 101) == pytest.approx(0.07) and lrs[-1] == pytest.approx(2.0 * triangle(100, 101))


def test_linear_falls_from_the_peak_to_zero_without_warm_up():
    lrs = _lrs(OptimConfig(lr=2.0, schedule="linear"), total=100, per_epoch=10)
    assert lrs[0] == pytest.approx(2.0) and lrs[-1] == pytest.approx(2.0 / 100)  # 0 after the last update
    steps = [a - b for a, b in pairwise(lrs)]
    assert steps == pytest.approx([2.0 / 100] * 99)  # equal steps down


def test_constant_schedule():
    assert set(_lrs(OptimConfig(lr=0.3, schedule="constant"), total=5, per_epoch=5)) == {0.3}


@pytest.mark.parametrize("optimizer", ["sgd", "adamw", "muon"])
def test_layer_decay_scales_each_depth_as_timm_numbers_them(optimizer):
    from quicktrain.config import OptimConfig
    from quicktrain.engine.optim import build_optimizer, layer_ids
    from quicktrain.models import create_model

    model = create_model("test_vit", num_classes=10, image_size=32)
    cfg = OptimConfig(optimizer=optimizer, lr=0.1, muon_lr=0.02, layer_decay=0.5, norm_bias_lr_scale=4.0)
    opt = build_optimizer(model, cfg)
    ids, layers = layer_ids(model)
    assert layers == 4  # embeddings, 2 blocks, head (with the final norm)
    seen = [id(p) for g in opt.param_groups for p in g["params"]]
    assert sorted(seen) == sorted(id(p) for p in model.parameters())  # every parameter once
    for group in opt.param_groups:
        for p in group["params"]:
            assert group["lr_scale"] == 0.5 ** (layers - 1 - ids[id(p)])
        base = 0.02 if group.get("muon") else 0.1 * (4.0 if group["params"][0] is model.norm.bias else 1.0)
        if group.get("muon") or group["weight_decay"] or group["params"][0] is model.norm.bias:
            assert group["lr"] == pytest.approx(base * group["lr_scale"])
    by_param = {id(p): g["lr_scale"] for g in opt.param_groups for p in g["params"]}
    assert by_param[id(model.patch_embed.proj.weight)] == 0.125 and by_param[id(model.head.weight)] == 1.0
    assert by_param[id(model.blocks[0].attn.qkv.weight)] == 0.25 and by_param[id(model.blocks[1].mlp.fc1.weight)] == 0.5


def test_layer_decay_groups_models_without_a_group_matcher():
    from quicktrain.engine.optim import layer_ids
    from quicktrain.models import create_model

    model = create_model("speedrun_net", num_classes=10)
    ids, layers = layer_ids(model)
    assert layers >= 2 and len(ids) == len(list(model.parameters()))
