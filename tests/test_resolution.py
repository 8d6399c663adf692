"""Progressive resizing: which epochs train small, that only the size changes (never the data
order, the labels or the augmentation), and that evaluation stays at full size."""

import pytest
import torch
from conftest import tiny_config

from quicktrain.config import Config
from quicktrain.engine import train
from quicktrain.engine.step import train_step
from quicktrain.errors import ConfigError
from quicktrain.techniques.resolution import ProgressiveResize


def test_the_first_epochs_are_small_then_full_size():
    resize = ProgressiveResize(24, 2)
    x = torch.randn(4, 3, 32, 32)
    sizes = []
    for epoch in range(4):
        resize.set_epoch(epoch)
        sizes.append(resize(x).shape[-1])
    assert sizes == [24, 24, 32, 32]


def test_a_middle_stage_follows_the_low_res_epochs():
    resize = ProgressiveResize(24, 2, 28, 2)
    x = torch.randn(4, 3, 32, 32)
    sizes = []
    for epoch in range(6):
        resize.set_epoch(epoch)
        sizes.append(resize(x).shape[-1])
    assert sizes == [24, 24, 28, 28, 32, 32]
    assert resize.banner() == "the first epochs 2 at 24 px, then 2 at 28 px (downscaled on the device)"
    middle_only = ProgressiveResize(None, 0, 28, 1)
    middle_only.set_epoch(0)
    assert middle_only.active and middle_only(x).shape[-1] == 28


def test_off_passes_the_batch_through_untouched():
    resize = ProgressiveResize(None, 0)
    resize.set_epoch(0)
    x = torch.randn(2, 3, 32, 32)
    assert resize(x) is x and not resize.active


def test_downscale_averages_instead_of_skipping_pixels():
    # a one-pixel checkerboard halved: antialiasing gives its mean everywhere, not every other pixel
    board = ((torch.arange(32)[:, None] + torch.arange(32)[None, :]) % 2).float().expand(1, 3, 32, 32)
    resize = ProgressiveResize(16, 1)
    resize.set_epoch(0)
    small = resize(board)
    assert small.shape[-1] == 16
    torch.testing.assert_close(small, torch.full_like(small, 0.5), atol=0.02, rtol=0)


def test_resizing_keeps_the_data_order_and_labels(tmp_path, monkeypatch):
    """Every update sees the same labels, in the same order, with and without the switch."""
    seen = {}
    stages = {"data.low_res": 16, "data.low_res_epochs": 1, "data.mid_res": 24, "data.mid_res_epochs": 1}
    for name, extra in (("full", {}), ("low", stages)):
        rows = seen[name] = []

        def spy(state, batch, rows=rows):
            rows.append((batch[1].tolist(), state.techniques.micro_input(torch.zeros(1, 3, 32, 32)).shape[-1]))
            return train_step(state, batch)

        monkeypatch.setattr("quicktrain.engine.oom.train_step", spy)
        cfg = tiny_config(tmp_path / name, **{"run.epochs": 3, "model.name": "test_resnet", **extra})
        result = train(cfg)
        assert result.summary["status"] == "completed"
    assert [labels for labels, _ in seen["full"]] == [labels for labels, _ in seen["low"]]
    assert [size for _, size in seen["low"]] == [16] * 3 + [24] * 3 + [32] * 3  # 96 images / 32: 3 per epoch
    assert {size for _, size in seen["full"]} == {32}


def test_mid_res_needs_a_size_above_low_res():
    with pytest.raises(ConfigError, match="mid_res_epochs=2 needs a size: add --mid-res"):
        Config.from_overrides({"data.mid_res_epochs": 2})
    with pytest.raises(ConfigError, match="data.mid_res=24 must be above data.low_res=24"):
        Config.from_overrides(
            {"data.low_res": 24, "data.low_res_epochs": 1, "data.mid_res": 24, "data.mid_res_epochs": 1}
        )
    cfg = Config.from_overrides(
        {"data.low_res": 24, "data.low_res_epochs": 1, "data.mid_res": 28, "data.mid_res_epochs": 1}
    )
    assert (cfg.data.mid_res, cfg.data.mid_res_epochs) == (28, 1)


def test_low_res_epochs_needs_a_size():
    with pytest.raises(ConfigError, match="low_res_epochs=2 needs a size"):
        Config.from_overrides({"data.low_res_epochs": 2})
    with pytest.raises(ConfigError, match="data.low_res=0 must be positive"):
        Config.from_overrides({"data.low_res": 0, "data.low_res_epochs": 1})
