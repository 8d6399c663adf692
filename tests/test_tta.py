"""Test-time augmentation: which views are averaged with which weights, and its timing."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config
from torch import nn

from quicktrain.config import Config
from quicktrain.engine.evaluate import TTA, least_confident, mirrored, mirrored_shifted
from quicktrain.engine.trainer import train
from quicktrain.errors import ConfigError


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


class Sizes(nn.Module):
    """A linear head on the flattened image that records the batch size of every call."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.head = nn.Linear(3 * 6 * 6, 5)
        self.sizes: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.sizes.append(len(x))
        return self.head(x.flatten(1))


def test_selective_tta_gives_the_least_confident_images_the_views_and_the_others_their_plain_logits() -> None:
    torch.manual_seed(1)
    model = Sizes()
    x = torch.randn(8, 3, 6, 6)
    with torch.no_grad():
        plain = model(x)
        full = mirrored_shifted(model, x)
        model.sizes.clear()
        out = least_confident(mirrored_shifted, 0.25)(model, x)
    confidence = plain.softmax(dim=1).amax(dim=1)
    unsure = set(confidence.argsort()[:2].tolist())  # the two least confident of 8
    assert model.sizes == [8, 2, 2, 2, 2, 2]  # the plain view once for all, reused; 5 more views for two images
    for i in range(8):
        torch.testing.assert_close(out[i], full[i] if i in unsure else plain[i])
    assert not torch.allclose(full[sorted(unsure)], plain[sorted(unsure)])  # the views did change them


def test_selective_tta_on_every_image_is_the_full_tta() -> None:
    torch.manual_seed(2)
    model = Sizes()
    x = torch.randn(5, 3, 6, 6)
    with torch.no_grad():
        torch.testing.assert_close(least_confident(mirrored, 1.0)(model, x), mirrored(model, x))
        plain, full = model(x), mirrored(model, x)
        one = least_confident(mirrored, 0.01)(model, x)  # 1% of 5 images: still at least one gets the views
    unsure = int(plain.softmax(dim=1).amax(dim=1).argmin())
    assert not torch.allclose(full[unsure], plain[unsure])  # the views change that image's logits ...
    torch.testing.assert_close(one[unsure], full[unsure])  # ... and it got them
    others = [i for i in range(5) if i != unsure]
    torch.testing.assert_close(one[others], plain[others])  # the rest kept the plain view


def test_runs_with_selective_tta_evaluate_and_record_it(tmp_path) -> None:
    result = train(tiny_config(tmp_path, **{"run.tta": "flip_translate", "run.tta_fraction": 0.2}))
    assert result.summary["status"] == "completed" and 0.0 <= result.history[-1]["test_accuracy"] <= 1.0
    assert result.summary["tta"] == "flip_translate" and result.summary["tta_fraction"] == 0.2


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_tta_fraction_outside_0_1_is_refused_naming_the_value(bad) -> None:
    with pytest.raises(ConfigError, match=f"run.tta_fraction={bad} must be in \\(0, 1\\]"):
        Config.from_overrides({"run.tta_fraction": bad})
