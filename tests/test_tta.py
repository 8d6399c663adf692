"""Test-time augmentation: which views are averaged with which weights, and its timing."""

from __future__ import annotations

import torch
from conftest import tiny_config
from torch import nn

from quicktrain.engine.evaluate import TTA, mirrored, mirrored_shifted
from quicktrain.engine.trainer import train


class TopLeft(nn.Module):
    """'Logits' = the top-left pixel of each channel, counting the views it is shown."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x[:, :, 0, 0]


def test_flip_averages_the_image_and_its_mirror() -> None:
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    model = TopLeft()
    out = mirrored(model, x)
    assert model.calls == 2
    torch.testing.assert_close(out, 0.5 * (x[:, :, 0, 0] + x[:, :, 0, -1]))


def test_flip_translate_adds_the_mirrored_views_shifted_one_pixel_both_ways() -> None:
    x = torch.randn(2, 3, 6, 6)
    model = TopLeft()
    out = mirrored_shifted(model, x)
    assert model.calls == 6
    # reflection padding: shifted up-left, the top-left pixel is x[1, 1]; mirrored, x[1, W-2]
    # (the same two for the down-right shift, whose mirrored top-left reflects to x[1, W-2])
    shifted = 0.5 * (x[:, :, 1, 1] + x[:, :, 1, -2])
    expected = 0.5 * (0.5 * (x[:, :, 0, 0] + x[:, :, 0, -1])) + 0.5 * shifted
    torch.testing.assert_close(out, expected)


def test_mirrored_logits_do_not_change_when_the_input_is_mirrored() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.LazyLinear(5))
    x = torch.randn(2, 3, 8, 8)
    assert not torch.allclose(model(x), model(x.flip(-1)))
    torch.testing.assert_close(mirrored(model, x), mirrored(model, x.flip(-1)))


def test_runs_record_the_test_time_augmentation_and_its_time(tmp_path) -> None:
    result = train(tiny_config(tmp_path, **{"run.tta": "flip_translate"}))
    assert set(TTA) == {"off", "flip", "flip_translate"}
    assert result.summary["tta"] == "flip_translate"
    assert result.summary["test_eval_time_s"] > 0 and result.history[-1]["test_eval_time_s"] > 0
