"""Streaming image folders: decoded per batch, yet the same batches, order and weights as in memory."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tiny_config
from test_data import _write_folder

from quicktrain.config import Config, DataConfig
from quicktrain.data.loader import make_loader, set_epoch
from quicktrain.data.sources import load_arrays
from quicktrain.data.stream import FileImages
from quicktrain.engine import train
from quicktrain.engine.setup import build_run
from quicktrain.errors import ConfigError


@pytest.fixture
def folder(tmp_path):
    _write_folder(tmp_path / "ds", per_class=6, size=12, fmt="JPEG")
    return tmp_path / "ds"


def _data(folder, mode: str, **extra) -> DataConfig:
    return DataConfig(dataset=f"imagefolder:{folder}", resolution=8, data_mode=mode, **extra)


def test_streamed_splits_decode_to_the_in_memory_pixels(folder):
    memory = load_arrays(_data(folder, "memory"), progress=False)
    stream = load_arrays(_data(folder, "stream"), progress=False)
    assert isinstance(stream.train.images, FileImages) and stream.train.streamed and not memory.train.streamed
    assert stream.train.images.shape == memory.train.images.shape
    np.testing.assert_array_equal(stream.train.images[np.array([5, 0, 17])], memory.train.images[[5, 0, 17]])
    np.testing.assert_array_equal(stream.test.images[2:6], memory.test.images[2:6])
    np.testing.assert_array_equal(stream.train.labels, memory.train.labels)


@pytest.mark.parametrize(("rank", "world"), [(0, 1), (1, 2)])
def test_streaming_and_memory_loaders_yield_identical_batches(folder, rank, world):
    memory = load_arrays(_data(folder, "memory", max_train_samples=15), progress=False).train
    stream = load_arrays(_data(folder, "stream", max_train_samples=15), progress=False).train
    loaders = [
        make_loader(s, 6, True, seed=4, workers=w, rank=rank, world=world) for s, w in ((memory, 0), (stream, 1))
    ]
    for epoch in (0, 2):
        for loader in loaders:
            set_epoch(loader, epoch)
        batches = [list(loader) for loader in loaders]
        assert len(batches[0]) == len(batches[1]) > 0
        for (xa, ya), (xb, yb) in zip(*batches):
            assert torch.equal(xa, xb) and torch.equal(ya, yb)


def test_a_streamed_run_trains_to_the_same_weights(folder, tmp_path):
    common = {"data.dataset": f"imagefolder:{folder}", "data.resolution": 8, "data.max_train_samples": None}
    common.update({"data.max_test_samples": None, "model.name": "test_resnet", "run.epochs": 2, "run.batch_size": 6})
    a = train(tiny_config(tmp_path / "memory", **common, **{"data.data_mode": "memory"}))
    b = train(tiny_config(tmp_path / "stream", **common, **{"data.data_mode": "stream"}))
    assert (a.summary["data_mode"], b.summary["data_mode"]) == ("memory", "stream")
    assert a.summary["normalization"] == b.summary["normalization"]
    wa, wb = (torch.load(r.folder / "model.pt", weights_only=True) for r in (a, b))
    for key in wa:
        torch.testing.assert_close(wa[key], wb[key], rtol=0, atol=0)


def test_auto_streams_when_the_decoded_set_exceeds_the_budget(folder, monkeypatch):
    # 18 train + 18 test images of 8x8x3 = 6,912 bytes decoded
    monkeypatch.setenv("QUICKTRAIN_MEMORY_BUDGET_MB", str(6000 / 2**20))
    assert load_arrays(_data(folder, "auto"), progress=False).train.streamed
    monkeypatch.setenv("QUICKTRAIN_MEMORY_BUDGET_MB", str(8000 / 2**20))
    assert not load_arrays(_data(folder, "auto"), progress=False).train.streamed


def test_a_folder_with_train_and_val_is_accepted(folder):
    (folder / "test").rename(folder / "val")
    arrays = load_arrays(_data(folder, "memory"), progress=False)
    assert len(arrays.test) == 18 and arrays.classes == ("cat", "dog", "frog")


def test_the_device_loader_refuses_a_streamed_split(folder, tmp_path):
    cfg = tiny_config(tmp_path / "run", **{"data.dataset": f"imagefolder:{folder}", "data.resolution": 8})
    cfg = Config.from_overrides({"data.data_mode": "stream", "data.loader": "device"}, cfg)
    with pytest.raises(ConfigError, match="use --data-mode memory"):
        build_run(cfg, progress=False)
