"""The photo store's two formats: raw pixels, or JPEGs re-encoded at the store side; auto's choice;
the JPEG decoders agree."""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import tiny_config
from PIL import Image
from test_photos import write_photos

from quicktrain.cli import main
from quicktrain.data import jpeg
from quicktrain.data.imagefolder import choose_store_format, probe_sizes
from quicktrain.data.photo_store import decode_photo, eval_crop, open_store
from quicktrain.engine import train
from quicktrain.errors import ConfigError


@pytest.fixture
def photos(tmp_path):
    return write_photos(tmp_path / "photos", per_class=6, low=120, high=200)


def _files(photos):
    return sorted((photos / "train").rglob("*.jpg"))


def test_the_jpeg_store_is_no_bigger_than_the_source_and_close_to_the_raw_one(photos, tmp_path):
    files = _files(photos)
    raw = open_store(files, 96, 64, 0.875, cache_dir=str(tmp_path / "c"), progress=False, fmt="raw")
    packed = open_store(files, 96, 64, 0.875, cache_dir=str(tmp_path / "c"), progress=False, fmt="jpeg")
    assert (raw.format, packed.format) == ("raw", "jpeg") and raw.folder != packed.folder
    source = sum(p.stat().st_size for p in files)
    assert packed.nbytes() <= source < raw.nbytes()
    np.testing.assert_array_equal(packed.stored, raw.stored)
    np.testing.assert_array_equal(packed.source, raw.source)
    for row in range(len(files)):
        a, b = raw.image(row).astype(int), packed.image(row).astype(int)
        assert a.shape == b.shape and np.abs(a - b).mean() < 12  # quality 90 on noise: a few levels
    crops = packed[np.arange(3)]
    assert crops.shape == (3, 64, 64, 3)
    for i, path in enumerate(files[:3]):  # predict decodes a file as the jpeg store's evaluation does
        np.testing.assert_array_equal(eval_crop(path, 96, 64, 0.875, "jpeg"), crops[i])


def test_a_damaged_jpeg_store_is_rebuilt(photos, tmp_path, quicktrain_log):
    files = _files(photos)
    store = open_store(files, 96, 64, 0.875, cache_dir=str(tmp_path / "c"), progress=False, fmt="jpeg")
    expected = store[np.arange(len(files))]
    with open(store.folder / "jpegs.bin", "r+b") as f:
        f.truncate(100)
    again = open_store(files, 96, 64, 0.875, cache_dir=str(tmp_path / "c"), progress=False, fmt="jpeg")
    assert "damaged" in quicktrain_log.text
    np.testing.assert_array_equal(again[np.arange(len(files))], expected)


def test_auto_keeps_raw_pixels_only_up_to_twice_the_source(photos, tmp_path):
    files = _files(photos)
    probed = probe_sizes(files)
    fmt, why = choose_store_format("auto", probed, 128, files, str(tmp_path))
    assert fmt == "jpeg" and "over 2x" in why and "MiB" in why  # noisy JPEGs: raw pixels several times bigger
    pngs = tmp_path / "png"
    pngs.mkdir()
    for i, path in enumerate(files):  # the same pixels as PNG: raw pixels are smaller than the files
        with Image.open(path) as img:
            img.save(pngs / f"{i}.png")
    png_files = sorted(pngs.glob("*.png"))
    fmt, why = choose_store_format("auto", probe_sizes(png_files), 128, png_files, str(tmp_path))
    assert fmt == "raw" and "auto: raw up to 2x" in why
    assert choose_store_format("raw", probed, 96, files, str(tmp_path)) == ("raw", "as asked (--store-format)")


def test_a_run_says_which_store_and_why_and_records_it(photos, tmp_path, capsys):
    argv = ["train", "--dataset", f"imagefolder:{photos}", "--model", "test_resnet", "--resolution", "112"]
    argv += ["--epochs", "1", "--batch-size", "6", "--no-progress", "--no-tensorboard", "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    assert "photo store: jpeg, raw pixels" in capsys.readouterr().out
    cfg = tiny_config(tmp_path / "raw", **{"data.dataset": f"imagefolder:{photos}", "data.store_format": "raw"})
    summary = train(cfg).summary
    assert summary["input"]["store_format"] == "raw" and "photo store: raw, as asked" in summary["input"]["notes"][-1]
    with pytest.raises(ConfigError, match="store_format"):
        tiny_config(None, **{"data.store_format": "png"})


def test_every_installed_decoder_gives_libjpegs_pixels():
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:90, 0:130]
    smooth = np.stack([yy * 2, xx * 1.5, 255 - yy - xx], axis=-1)  # a photo-like gradient, a little noise
    pixels = np.clip(smooth + rng.normal(0, 4, smooth.shape), 0, 255).astype(np.uint8)
    data = jpeg.encode(pixels)
    reference = jpeg.decoder("pillow")(data).astype(int)
    assert reference.shape == (90, 130, 3) and np.abs(reference - pixels).mean() < 4
    for name in jpeg.DECODERS:
        if jpeg.installed(name):
            assert np.abs(jpeg.decoder(name)(data).astype(int) - reference).max() <= 2, name
    assert jpeg.decoder_name("auto") == next(n for n in jpeg.DECODERS if jpeg.installed(n))
    with pytest.raises(ConfigError, match="not one of auto"):
        jpeg.decoder_name("libjpeg")


def test_decoding_a_store_side_jpeg_matches_pillow_at_full_size(tmp_path):
    """decode_photo's reduced-size path is used when building; the stored JPEG decodes at its own size."""
    path = tmp_path / "x.jpg"
    Image.fromarray(np.full((400, 300, 3), 90, np.uint8)).save(path, quality=95)
    small, source = decode_photo(path, 100)
    assert source == (400, 300) and min(small.shape[:2]) == 100
    again = jpeg.decoder()(jpeg.encode(small))
    assert again.shape == small.shape
    buf = io.BytesIO(jpeg.encode(small))
    assert Image.open(buf).format == "JPEG"
