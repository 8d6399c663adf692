"""A user's own nn.Module and Dataset through train(...): every technique, a complete record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, ctrl_c_at_evaluation, tiny_config
from PIL import Image
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from quicktrain.data.objects import arrays_from_datasets
from quicktrain.engine import train
from quicktrain.errors import DataError


def _net(classes: int = 4) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, classes),
    )  # fmt: skip


def _data(n: int, seed: int) -> TensorDataset:
    """Four classes told apart by which colour channel is bright (or none)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (n,), generator=g)
    images = torch.randint(0, 100, (n, 3, 16, 16), generator=g, dtype=torch.uint8)
    for c in range(3):
        images[labels == c, c] += 120
    return TensorDataset(images, labels)


def test_a_module_and_tensor_datasets_learn_with_techniques_and_write_a_complete_record(tmp_path):
    overrides = {"run.epochs": 4, "run.batch_size": 32, "techniques.accum_steps": 2, "optim.lr": 0.1}
    overrides.update({"techniques.amp": "bf16", "techniques.channels_last": True})
    overrides.update({"data.max_train_samples": None, "data.max_test_samples": None})  # the whole datasets
    cfg = tiny_config(tmp_path / "run", **overrides)
    net = _net()
    result = train(cfg, model=net, train_data=_data(256, 0), test_data=_data(64, 1))
    s = result.summary
    assert s["status"] == "completed" and s["model"] == "object:Sequential"
    assert s["dataset"] == "object:TensorDataset" and s["train_samples"] == 256 and s["test_samples"] == 64
    assert s["accum_steps"] == 2 and s["amp"] == "bf16" and s["channels_last"] is True
    losses = [row["train_loss"] for row in result.history]
    assert losses[-1] < losses[0] and s["test_accuracy"] > 0.5  # chance: 0.25
    for name in ("config.yaml", "env.json", "metrics.jsonl", "evals.jsonl", "summary.json", "model.pt"):
        assert (result.folder / name).is_file(), name
    saved = torch.load(result.folder / "model.pt", weights_only=True)
    assert saved.keys() == net.state_dict().keys()  # the user's module was trained in place


def test_a_run_with_objects_resumes_exactly(tmp_path, monkeypatch):
    overrides = {"run.epochs": 2, "run.batch_size": 32, "optim.lr": 0.05}
    data = {"train_data": _data(96, 0), "test_data": _data(32, 1)}
    straight = train(tiny_config(tmp_path / "a", **overrides), model=_net(), **data)
    ctrl_c_at_evaluation(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_config(tmp_path / "b", **overrides), model=_net(), **data)
    monkeypatch.undo()
    resumed = train(tiny_config(tmp_path / "b", **overrides, **{"run.resume": "auto"}), model=_net(), **data)
    a = torch.load(straight.folder / "model.pt", weights_only=True)
    b = torch.load(resumed.folder / "model.pt", weights_only=True)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)


class _Pil(Dataset):
    """Grayscale PIL images and float CHW tensors: the forms datasets usually yield."""

    def __init__(self, as_float: bool) -> None:
        self.as_float = as_float

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int):
        pixels = np.full((8, 8), 40 * i, dtype=np.uint8)
        if self.as_float:
            return torch.from_numpy(pixels).float()[None] / 255, i % 2
        return Image.fromarray(pixels, mode="L"), i % 2


@pytest.mark.parametrize("as_float", [False, True])
def test_pil_grayscale_and_float_images_become_the_same_uint8_rgb(as_float):
    arrays = arrays_from_datasets(_Pil(as_float), None)
    assert arrays.train.images.shape == (6, 8, 8, 3) and arrays.classes == ("0", "1")
    assert [int(arrays.train.images[i, 0, 0, 2]) for i in range(6)] == [0, 40, 80, 120, 160, 200]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (TensorDataset(torch.zeros(2, 3, 8, 6), torch.tensor([0, 1])), "square images are needed"),
        (TensorDataset(torch.full((2, 3, 8, 8), 2.0), torch.tensor([0, 1])), "float image with values in [2, 2]"),
        (TensorDataset(torch.zeros(0, 3, 8, 8), torch.zeros(0)), "train_data is empty"),
    ],
)
def test_unusable_datasets_are_named_errors(data, message):
    with pytest.raises(DataError, match=re.escape(message)):
        arrays_from_datasets(data, None)


def test_the_documented_example_runs(tmp_path, monkeypatch):
    text = (REPO / "docs" / "data.md").read_text()
    section = text[text.index("## Your own model and data") :]
    code = section[
        section.index("```python") + len("```python") : section.index("```\n", section.index("```python") + 9)
    ]
    assert len(code.strip().splitlines()) <= 14
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "docs/data.md", "exec"), namespace)
    summary = namespace["result"].summary
    assert summary["status"] == "completed" and summary["test_accuracy"] is not None
    assert json.loads((Path(namespace["result"].folder) / "summary.json").read_text())["model"] == "object:Sequential"
