"""Models from outside the registry: any timm architecture, and the user's own factory by path."""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from quicktrain.cli import main
from quicktrain.models import check_model, create_model
from quicktrain.records import model_slug

TINY = ["--dataset", "synthetic", "--max-train-samples", "64", "--max-test-samples", "16", "--epochs", "1"]
TINY += ["--batch-size", "16", "--amp", "off", "--no-tensorboard", "--no-progress"]

FACTORY = """
from torch import nn


def make(num_classes, image_size):
    assert image_size == 32
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, num_classes),
    )


def not_a_model(num_classes, image_size):
    return [num_classes]


def raises(num_classes, image_size):
    raise ValueError("no such width")
"""


@pytest.fixture
def factory_file(tmp_path: Path) -> Path:
    path = tmp_path / "user_nets" / "tiny_net.py"
    path.parent.mkdir()
    path.write_text(FACTORY)
    return path


def test_timm_families_are_adapted_to_small_inputs() -> None:
    resnet = create_model("timm:test_resnet", num_classes=10, image_size=32)
    first = resnet.conv1[0] if isinstance(resnet.conv1, nn.Sequential) else resnet.conv1
    assert first.stride == (1, 1) and isinstance(resnet.maxpool, nn.Identity)
    vit = create_model("timm:test_vit", num_classes=10, image_size=32)
    assert vit.patch_embed.proj.kernel_size == (4, 4)
    assert vit(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    assert "used unchanged" in check_model("timm:test_efficientnet").note(32)
    assert "CIFAR stem" in check_model("timm:test_resnet").note(32)


def test_a_timm_name_trains_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert main(["train", *TINY, "--model", "timm:test_convnext", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "model         used unchanged: timm test_convnext" in printed  # the banner says so
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["model"] == "timm:test_convnext"
    assert summary["optimizer_updates"] == 4


def test_models_lists_timm_names(capsys: pytest.CaptureFixture) -> None:
    assert main(["models", "--timm", "test_vit*"]) == 0
    assert "timm:test_vit\n" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("timm:no_such_net_xyz", "unknown timm model 'no_such_net_xyz'"),
        ("{file}:nope", "has no function 'nope'; functions there: make, not_a_model, raises"),
        ("{file}:not_a_model", "returned list, not a torch.nn.Module"),
        ("{file}:raises", "failed: ValueError: no such width"),
        ("{dir}/missing.py:make", "file '{dir}/missing.py' does not exist"),
        ("no_such_pkg.nets:make", "cannot import module 'no_such_pkg.nets'"),
    ],
)
def test_bad_model_references_are_one_line_exit_2(spec, message, factory_file, tmp_path, capsys) -> None:
    fill = {"file": factory_file, "dir": factory_file.parent}
    out = tmp_path / "run"
    assert main(["train", *TINY, "--model", spec.format(**fill), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message.format(**fill) in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_a_factory_by_path_and_by_module_name_trains(factory_file, tmp_path, monkeypatch) -> None:
    from quicktrain.config import Config
    from quicktrain.engine import train

    base = {"data.dataset": "synthetic", "data.max_train_samples": 64, "data.max_test_samples": 16}
    base.update({"run.epochs": 1, "run.batch_size": 16, "run.progress": False, "run.tensorboard": False})
    by_path = train(
        Config.from_overrides({**base, "model.name": f"{factory_file}:make", "run.out": str(tmp_path / "a")})
    )
    monkeypatch.syspath_prepend(str(factory_file.parent))
    by_name = train(Config.from_overrides({**base, "model.name": "tiny_net:make", "run.out": str(tmp_path / "b")}))
    for result in (by_path, by_name):
        assert result.summary["status"] == "completed" and result.summary["num_params"] == 8 * 27 + 8 + 16 + 90
    assert model_slug(f"{factory_file}:make") == "tiny_net-make"


@pytest.mark.slow
def test_a_factory_file_runs_through_ablate_subprocesses(factory_file, tmp_path) -> None:
    out = tmp_path / "abl"
    argv = ["ablate", "--techniques", "ga", "--repeats", "1", "--models", f"{factory_file}:make", "--out", str(out)]
    assert main([*argv, "--no-progress", *TINY]) == 0
    with (out / "ablation.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["status"] for r in rows] == ["completed", "completed"]
    assert {r["run"] for r in rows} == {"tiny_net-make__synthetic__baseline__r0", "tiny_net-make__synthetic__ga__r0"}


@pytest.mark.slow
def test_a_factory_file_runs_on_two_gloo_ranks(factory_file, tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    out = tmp_path / "ddp"
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port,
              "-m", "quicktrain", "train", *TINY, "--model", f"{factory_file}:make", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(launch, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["status"] == "completed"
