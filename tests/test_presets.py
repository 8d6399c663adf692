"""Paper reproduction presets: they parse, say what the study used, and train on CPU with --smoke."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from quicktrain.cli import main
from quicktrain.config import Config, smoke

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
PAPER = sorted((CONFIGS / "paper").glob("*.yaml"))
SPEEDRUN = CONFIGS / "speedrun_cifar10.yaml"
SPEEDRUN_MUON = CONFIGS / "speedrun_muon_cifar10.yaml"


def test_there_is_a_preset_per_model_and_dataset() -> None:
    names = {p.stem for p in PAPER}
    assert names == {f"{m}_{d}" for m in ("resnet50", "efficientnet_b0", "vit_base") for d in ("cifar10", "cifar100")}


def test_resnet50_preset_is_the_studys_recipe() -> None:
    cfg = Config.load(PAPER[[p.stem for p in PAPER].index("resnet50_cifar10")])
    assert (cfg.model.name, cfg.model.image_size, cfg.model.pretrained) == ("resnet50", None, None)
    assert (cfg.optim.optimizer, cfg.optim.schedule, cfg.optim.lr, cfg.optim.weight_decay) == (
        "adam", "onecycle", 1e-3, 1e-3,
    )  # fmt: skip
    assert (cfg.run.batch_size, cfg.run.epochs) == (128, 30)


def test_fine_tuning_presets_use_hub_weights_at_224() -> None:
    for path in PAPER:
        if not path.stem.startswith("resnet50"):
            cfg = Config.load(path)
            assert cfg.model.pretrained == "hub" and cfg.model.image_size == 224


def test_smoke_keeps_model_and_optimizer_but_not_the_data() -> None:
    cfg = Config.load(PAPER[[p.stem for p in PAPER].index("vit_base_cifar100")])
    small = smoke(cfg)
    assert small.data.dataset == "synthetic:100" and small.model.pretrained is None
    assert (small.model.name, small.model.image_size, small.optim) == (cfg.model.name, 224, cfg.optim)
    assert small.run.device == "cpu" and small.run.batch_size == 4


def test_speedrun_recipe_uses_the_record_holders_ideas() -> None:
    cfg = Config.load(SPEEDRUN)
    assert cfg.model.name == "speedrun_net" and cfg.data.loader == "device"
    assert cfg.optim.optimizer == "sgd" and cfg.optim.nesterov and cfg.optim.label_smoothing > 0
    assert cfg.optim.norm_bias_lr_scale > 1 and cfg.optim.lookahead is not None
    assert cfg.run.tta != "off" and cfg.techniques.channels_last and cfg.techniques.amp != "off"
    assert cfg.data.dataset == "cifar10" and cfg.data.download  # runnable after cloning (the JPEG copy: an override)


def test_muon_speedrun_differs_from_the_sgd_recipe_only_by_its_ingredients() -> None:
    sgd, muon = Config.load(SPEEDRUN).to_dict(), Config.load(SPEEDRUN_MUON).to_dict()
    changed = {f"{section}.{key}" for section in sgd for key in sgd[section] if sgd[section][key] != muon[section][key]}
    # Muon and its step at this batch; SGD's peak retuned for what is left with it (head, norm shifts)
    muon_keys = {"optim.optimizer", "optim.muon_lr", "optim.muon_momentum", "optim.lr"}
    muon_keys |= {"optim.muon_ns_steps", "optim.muon_precision"}  # the peers' 3 steps, in bf16 everywhere
    expected = muon_keys | {"data.low_res", "data.low_res_epochs", "data.crop_fill", "run.batch_size"}
    expected |= {"data.mid_res", "data.mid_res_epochs"}  # progressive resizing in three stages
    expected |= {"optim.label_smoothing", "run.tta_fraction"}  # 9 epochs, like SGD's
    expected |= {"techniques.cpu_allocator"}
    assert changed == expected | {"run.target_accuracy"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset", [*PAPER, SPEEDRUN, SPEEDRUN_MUON], ids=[p.stem for p in [*PAPER, SPEEDRUN, SPEEDRUN_MUON]]
)
def test_each_preset_trains_a_step_with_smoke(preset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["train", "--config", str(preset), "--smoke", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    raw = yaml.safe_load(preset.read_text())
    assert summary["status"] == "completed" and summary["optimizer_updates"] == 1
    assert summary["model"] == raw["model"]["name"] and summary["optimizer"] == raw["optim"]["optimizer"]
    assert summary["num_classes"] == (100 if raw["data"]["dataset"] == "cifar100" else 10)
    assert summary["image_size"] == raw["model"].get("image_size", 32)
