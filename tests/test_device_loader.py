"""`--loader device`: the same batches as the DataLoader path, augmentation right on hand-made images."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tiny_config

from quicktrain.cli import main
from quicktrain.config import DataConfig
from quicktrain.data.arrays import Split
from quicktrain.data.augment import AugmentSpec, CropFlip, crop_flip, cutout
from quicktrain.data.device_loader import DeviceLoader, crop_flip_tensor
from quicktrain.data.loader import make_loader, order_fingerprint, set_epoch
from quicktrain.data.sources import load_arrays
from quicktrain.data.synthetic import make_synthetic
from quicktrain.engine.trainer import train

CPU = torch.device("cpu")


def _split(n: int = 50) -> Split:
    return load_arrays(DataConfig(dataset="synthetic", max_train_samples=n)).train


def test_each_sample_once_per_epoch_and_the_same_batches_as_the_dataloader() -> None:
    split = _split()
    device, host = DeviceLoader(split, 16, seed=3, device=CPU), make_loader(split, 16, True, seed=3)
    for epoch in (0, 1):
        set_epoch(device, epoch)
        set_epoch(host, epoch)
        batches = list(device)
        assert len(batches) == len(device) == 4
        for (xd, yd), (xh, yh) in zip(batches, host):
            assert torch.equal(xd, xh) and torch.equal(yd, yh)
    set_epoch(device, 0)
    seen = torch.cat([x for x, _ in DeviceLoader(split, 16, seed=3, device=CPU, augment=False)])
    rows = sorted(map(bytes, seen.permute(0, 2, 3, 1).reshape(len(seen), -1).numpy()))
    assert rows == sorted(map(bytes, split.images.reshape(len(split), -1)))  # every sample exactly once


def test_crop_offset_and_flip_on_hand_made_images() -> None:
    img = np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3)
    padded = torch.nn.functional.pad(torch.from_numpy(img).permute(0, 3, 1, 2), (4, 4, 4, 4))
    dy, dx, flip = np.array([4, 5]), np.array([4, 3]), np.array([False, True])
    out = crop_flip_tensor(padded, torch.arange(2), torch.from_numpy(dy), torch.from_numpy(dx), torch.from_numpy(flip))
    assert torch.equal(out[0], torch.from_numpy(img[0]).permute(2, 0, 1))  # centre crop, no flip: unchanged
    # sample 1: one row down (last row zero padding), one column left, then mirrored
    expected = crop_flip(img, dy, dx, flip)
    assert torch.equal(out, torch.from_numpy(expected).permute(0, 3, 1, 2))
    assert (out[1, :, -1, :] == 0).all()


def test_a_smaller_crop_padding_shifts_less_and_both_loaders_agree() -> None:
    split = _split()
    spec = AugmentSpec(pad=2, flip="alternate")
    device = DeviceLoader(split, 16, seed=3, device=CPU, spec=spec)
    host = make_loader(split, 16, True, seed=3, spec=spec)
    for (xd, yd), (xh, yh) in zip(device, host):
        assert torch.equal(xd, xh) and torch.equal(yd, yh)
    p = CropFlip.draw(5000, seed=0, epoch=0, spec=AugmentSpec(pad=2))
    assert set(p.dy) == set(p.dx) == {0, 1, 2, 3, 4}
    assert order_fingerprint(50, 0, 2, True, AugmentSpec(pad=2)) != order_fingerprint(50, 0, 2, True)


def test_alternating_flip_mirrors_each_image_every_other_epoch() -> None:
    spec = AugmentSpec(flip="alternate")
    flips = np.stack([CropFlip.draw(1000, seed=0, epoch=e, spec=spec).flip for e in range(4)])
    assert (flips[0] != flips[1]).all() and (flips[1] != flips[2]).all() and (flips[0] == flips[2]).all()
    assert 400 < flips[0].sum() < 600  # the first flip is still random
    random = np.stack([CropFlip.draw(1000, seed=0, epoch=e).flip for e in range(2)])
    assert (random[0] == random[1]).mean() > 0.3  # random flips repeat by chance


def test_training_with_the_device_loader_matches_the_dataloader(tmp_path) -> None:
    host = train(tiny_config(tmp_path / "host", **{"run.epochs": 2}))
    device = train(tiny_config(tmp_path / "device", **{"run.epochs": 2, "data.loader": "device"}))
    assert host.summary["data_order"] == device.summary["data_order"]
    a = torch.load(tmp_path / "host" / "model.pt", weights_only=True)
    b = torch.load(tmp_path / "device" / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_cutout_blanks_one_clipped_square_and_both_loaders_agree() -> None:
    centre = np.array([[0.5, 0.5], [0.0, 0.95]])  # middle; top edge, near the right edge
    out = cutout(np.full((2, 8, 8, 3), 255, dtype=np.uint8), centre, size=4)
    assert (out[0, 2:6, 2:6] == 0).all() and (out[0] == 0).sum() == 4 * 4 * 3
    assert (out[1, 0:2, 5:8] == 0).all() and (out[1] == 0).sum() == 2 * 3 * 3  # clipped to 2 x 3
    split = _split()
    spec = AugmentSpec(pad=2, cutout=8)
    device = DeviceLoader(split, 16, seed=3, device=CPU, spec=spec)
    host = make_loader(split, 16, True, seed=3, spec=spec)
    for (xd, yd), (xh, yh) in zip(device, host):
        assert torch.equal(xd, xh) and torch.equal(yd, yh)
    assert order_fingerprint(50, 3, 1, True, spec) != order_fingerprint(50, 3, 1, True, AugmentSpec(pad=2))


def test_reflect_padding_mirrors_the_edge_and_both_loaders_agree() -> None:
    img = np.arange(1 * 4 * 4 * 1, dtype=np.uint8).reshape(1, 4, 4, 1) + 1  # no zero pixel
    # shifted two rows up and two columns left (offset 0 of pad 2): the border is the image mirrored
    out = crop_flip(img, np.array([0]), np.array([0]), np.array([False]), pad=2, fill="reflect")
    np.testing.assert_array_equal(out[0, :2, :2, 0], img[0, [2, 1]][:, [2, 1], 0])
    assert (crop_flip(img, np.array([0]), np.array([0]), np.array([False]), pad=2)[0, :2, :2] == 0).all()
    split = _split()
    spec = AugmentSpec(pad=2, flip="alternate", fill="reflect")
    device = DeviceLoader(split, 16, seed=3, device=CPU, spec=spec)
    host = make_loader(split, 16, True, seed=3, spec=spec)
    zero = DeviceLoader(split, 16, seed=3, device=CPU, spec=AugmentSpec(pad=2, flip="alternate"))
    differs = False
    for (xd, yd), (xh, yh), (xz, _) in zip(device, host, zero):
        assert torch.equal(xd, xh) and torch.equal(yd, yh)
        differs |= not torch.equal(xd, xz)
    assert differs  # the padding's content reaches the batches


def test_the_banner_says_how_training_images_are_augmented(tmp_path, capsys) -> None:
    tiny = ["--dataset", "synthetic", "--max-train-samples", "32", "--max-test-samples", "8", "--epochs", "1"]
    tiny += ["--amp", "off", "--no-tensorboard", "--no-progress", "--out", str(tmp_path / "run")]
    assert main(["train", *tiny, "--crop-pad", "2", "--crop-fill", "reflect", "--flip", "alternate"]) == 0
    assert "augment       random crop (padding 2, reflect), alternate flip\n" in capsys.readouterr().out
    assert main(["train", *tiny, "--no-augment", "--out", str(tmp_path / "plain")]) == 0
    assert "augment       off\n" in capsys.readouterr().out


def test_a_split_too_big_for_the_device_is_a_one_line_error(monkeypatch):
    from quicktrain.errors import ConfigError

    split = make_synthetic(num_train=8, num_test=1).train

    def full(self, *args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(torch.Tensor, "to", full)
    with pytest.raises(ConfigError, match="does not fit in cpu's memory beside the model; use --loader torch"):
        DeviceLoader(split, batch_size=4, seed=0, device=torch.device("cpu"))
