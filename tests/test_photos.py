"""Folders of photos: aspect kept, RandomResizedCrop and the evaluation crop, one shared store."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tiny_config
from PIL import Image
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

from quicktrain.cli import main
from quicktrain.config import Config, DataConfig
from quicktrain.data.loader import make_loader, set_epoch
from quicktrain.data.photo_crops import centre_crop_boxes, resized_crop_boxes, uniforms
from quicktrain.data.photo_store import PhotoFiles, PhotoStore, decode_photo, open_store
from quicktrain.data.sources import load_arrays
from quicktrain.engine import train
from quicktrain.engine.setup import build_run
from quicktrain.errors import ConfigError, DataError
from quicktrain.inference import load_run, predict

COLOURS = ((200, 40, 40), (40, 200, 40), (40, 40, 200))


def write_photos(root: Path, per_class: int = 6, low: int = 64, high: int = 128, seed: int = 0) -> Path:
    """A photo-like folder: JPEGs of random sizes and aspect ratios, each class its own colour."""
    rng = np.random.default_rng(seed)
    for split, n in (("train", per_class), ("test", max(2, per_class // 2))):
        for c, colour in enumerate(COLOURS):
            folder = root / split / f"class{c}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                w, h = (int(v) for v in rng.integers(low, high, 2))
                pixels = np.clip(rng.normal(colour, 30, (h, w, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(folder / f"{i}.jpg", quality=92)
    return root


@pytest.fixture
def photos(tmp_path: Path) -> Path:
    return write_photos(tmp_path / "photos")


def _data(folder: Path, **extra) -> DataConfig:
    return DataConfig(dataset=f"imagefolder:{folder}", **extra)


# ---- decoding and the store ------------------------------------------------------------------
def test_decoding_keeps_the_aspect_ratio_and_caps_the_shorter_side(tmp_path):
    big, small = tmp_path / "big.jpg", tmp_path / "small.png"
    Image.new("RGB", (400, 300), (10, 20, 30)).save(big)
    Image.new("RGB", (50, 70), (10, 20, 30)).save(small)
    image, source = decode_photo(big, 120)
    assert source == (300, 400) and image.shape == (120, 160, 3)  # 3:4 kept, shorter side 120
    image, source = decode_photo(small, 120)
    assert source == (70, 50) and image.shape == (70, 50, 3)  # smaller than the side: kept as it is


def test_the_store_holds_every_image_and_its_source_size(photos):
    files = sorted((photos / "train").rglob("*.jpg"))
    store = open_store(files, 48, 32, 0.875, progress=False)
    assert len(store) == len(files) and store.shape == (len(files), 32, 32, 3)
    for i, path in enumerate(files):
        with Image.open(path) as img:
            assert tuple(store.source[i]) == (img.size[1], img.size[0])
        np.testing.assert_array_equal(store.image(i), decode_photo(path, 48)[0])
        assert min(store.image(i).shape[:2]) == min(48, *store.source[i])


def test_a_damaged_store_is_rebuilt_with_a_warning(photos, quicktrain_log):
    files = sorted((photos / "train").rglob("*.jpg"))
    store = open_store(files, 48, 32, 0.875, progress=False)
    expected = store[np.arange(len(files))]
    with open(store.folder / "pixels.u8", "r+b") as f:
        f.truncate(100)
    again = open_store(files, 48, 32, 0.875, progress=False)
    assert "damaged" in quicktrain_log.text
    np.testing.assert_array_equal(again[np.arange(len(files))], expected)


def _open_in_process(args: tuple[list[str], str]) -> tuple[str, bytes]:
    files, cache = args
    store = open_store([Path(f) for f in files], 48, 32, 0.875, cache_dir=cache, workers=1, progress=False)
    return store.folder.name, store[np.arange(len(files))].tobytes()


def test_processes_starting_together_build_one_store_and_share_it(photos, tmp_path):
    files = [str(p) for p in sorted((photos / "train").rglob("*.jpg"))]
    cache = str(tmp_path / "shared-cache")
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.map(_open_in_process, [(files, cache)] * 3)
    assert len({name for name, _ in results}) == 1 and len({pixels for _, pixels in results}) == 1
    entries = sorted(p.name for p in Path(cache).iterdir() if not p.name.endswith(".lock"))
    assert entries == [results[0][0]]  # one store, no temporary folders left behind


def test_a_parallel_build_matches_a_serial_one(photos, tmp_path):
    files = sorted((photos / "train").rglob("*.jpg")) * 6  # 108 files: two chunks for two workers
    serial = open_store(files, 40, 32, 0.875, cache_dir=str(tmp_path / "a"), workers=1, progress=False)
    parallel = open_store(files, 40, 32, 0.875, cache_dir=str(tmp_path / "b"), workers=2, progress=False)
    assert (serial.folder / "pixels.u8").read_bytes() == (parallel.folder / "pixels.u8").read_bytes()


# ---- crops -------------------------------------------------------------------------------------
def test_random_resized_crops_have_torchvisions_statistics():
    n, sizes = 20000, np.tile([[300, 400]], (20000, 1))
    ours = resized_crop_boxes(sizes, uniforms(3, 0, np.arange(n), 22), (0.08, 1.0), (3 / 4, 4 / 3))
    torch.manual_seed(0)
    image = torch.zeros(3, 300, 400)
    theirs = np.array([v2.RandomResizedCrop.get_params(image, [0.08, 1.0], [3 / 4, 4 / 3]) for _ in range(n)])
    for boxes in (ours, theirs):
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 0] + boxes[:, 2] <= 300).all()
        assert (boxes[:, 1] + boxes[:, 3] <= 400).all()
    area = [b[:, 2] * b[:, 3] / 120000 for b in (ours, theirs)]
    assert abs(area[0].mean() - area[1].mean()) < 0.01 and abs(np.median(area[0]) - np.median(area[1])) < 0.015
    aspect = [np.log(b[:, 3] / b[:, 2]) for b in (ours, theirs)]
    assert abs(aspect[0].mean() - aspect[1].mean()) < 0.01 and abs(aspect[0].std() - aspect[1].std()) < 0.01
    centre = [(b[:, 0] + b[:, 2] / 2) / 300 for b in (ours, theirs)]
    assert abs(centre[0].mean() - centre[1].mean()) < 0.01


def test_a_narrow_image_falls_back_to_a_centred_crop_in_the_ratio_range():
    sizes = np.array([[400, 40]])  # 1:10, no try of ratio 3/4..4/3 at >= 8% of the area can fit... sometimes
    boxes = resized_crop_boxes(np.repeat(sizes, 500, 0), uniforms(0, 0, np.arange(500), 22), (0.9, 1.0), (3 / 4, 4 / 3))
    assert (boxes[:, 3] == 40).all() and (boxes[:, 2] == round(40 / 0.75)).all()  # the widest allowed, whole width
    assert (boxes[:, 0] == (400 - boxes[:, 2]) // 2).all()


def test_crops_depend_only_on_seed_epoch_and_index():
    u = uniforms(7, 2, np.array([0, 5, 9]), 22)
    np.testing.assert_array_equal(u[1:2], uniforms(7, 2, np.array([5]), 22))
    assert not np.array_equal(u, uniforms(7, 3, np.array([0, 5, 9]), 22))  # another epoch
    assert not np.array_equal(u, uniforms(8, 2, np.array([0, 5, 9]), 22))  # another seed


def test_the_evaluation_crop_is_timms_resize_then_centre_crop(tmp_path):
    yy, xx = np.mgrid[0:150, 0:200]
    smooth = 128 + 60 * np.sin(xx / 9.0)[..., None] * np.cos(yy / 13.0)[..., None] + np.array([0, 20, -20])
    image = np.clip(smooth, 0, 255).astype(np.uint8)  # structure at a few pixels' scale, no noise
    Image.fromarray(image).save(tmp_path / "a.png")
    store = open_store([tmp_path / "a.png"], 400, 64, 0.875, progress=False)
    ours = store[np.array([0])][0].astype(np.float32)
    resized = TF.resize(torch.from_numpy(image).permute(2, 0, 1), 73, antialias=True)  # shorter side 64 / 0.875
    big = resized.permute(1, 2, 0).numpy().astype(np.float32)
    top, left = (big.shape[0] - 64) // 2, (big.shape[1] - 64) // 2  # timm's centre crop

    def diff(dy: int, dx: int) -> float:
        return float(np.abs(ours - big[top + dy : top + dy + 64, left + dx : left + dx + 64]).mean())

    assert centre_crop_boxes(np.array([[150, 200]]), 64, 0.875).tolist() == [[9, 34, 132, 132]]
    near = [diff(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    assert diff(0, 0) <= 1.01 * min(near)  # the same region, to within the half pixel of timm's rounding
    assert diff(0, 0) < 0.6 * min(diff(2, 0), diff(0, 2), diff(-2, 0), diff(0, -2))


# ---- datasets, loaders, runs -------------------------------------------------------------------
def test_thumbnails_keep_cifar_crops_and_photos_get_resized_crops(photos, tmp_path):
    arrays = load_arrays(_data(photos), progress=False)
    assert arrays.crop == "resized" and isinstance(arrays.train.images, PhotoStore)
    shorter = [min(Image.open(p).size) for p in sorted((photos / "train").rglob("*.jpg"))]
    assert arrays.image_size == min(224, int(np.median(shorter)) // 32 * 32) == 64  # the documented default
    assert arrays.source_sizes["files"] == 18 and 64 <= arrays.source_sizes["min"][0] <= arrays.source_sizes["max"][0]
    assert load_arrays(_data(photos, resolution=48), progress=False).image_size == 48
    thumbs = tmp_path / "thumbs"
    write_photos(thumbs, low=24, high=25)  # 24x24
    arrays = load_arrays(_data(thumbs), progress=False)
    assert arrays.crop == "pad" and arrays.image_size == 24 and isinstance(arrays.train.images, np.ndarray)


def test_stored_and_streamed_photos_yield_identical_batches(photos):
    stored = load_arrays(_data(photos, resolution=32), progress=False)
    streamed = load_arrays(_data(photos, resolution=32, data_mode="stream"), progress=False)
    assert isinstance(streamed.train.images, PhotoFiles) and streamed.train.streamed and not stored.train.streamed
    from quicktrain.data.augment import AugmentSpec

    spec = AugmentSpec(crop="resized")
    loaders = [make_loader(a.train, 6, True, seed=1, workers=w, spec=spec) for a, w in ((stored, 0), (streamed, 1))]
    for epoch in (0, 3):
        for loader in loaders:
            set_epoch(loader, epoch)
        for (xa, ya), (xb, yb) in zip(*(list(loader) for loader in loaders), strict=True):
            assert xa.shape == (6, 3, 32, 32) and torch.equal(xa, xb) and torch.equal(ya, yb)
    np.testing.assert_array_equal(stored.test.images[0:4], streamed.test.images[0:4])


def test_a_photo_run_records_its_input_and_predict_matches_evaluation(photos, tmp_path, quicktrain_log):
    cfg = tiny_config(tmp_path / "run", **{"data.dataset": f"imagefolder:{photos}", "data.max_train_samples": None})
    cfg = Config.from_overrides({"data.max_test_samples": None, "model.name": "test_resnet", "run.batch_size": 6}, cfg)
    result = train(cfg)
    record = result.summary["input"]
    assert record["crop"] == "resized" and record["size"] == 64 and record["store_side"] == 74
    assert record["source_sizes"]["files"] == 18 and result.summary["data_mode"] == "store"
    assert "random resized crop" in quicktrain_log.text and "source " in quicktrain_log.text
    loaded = load_run(result.folder, device="cpu")
    files = sorted((photos / "test").rglob("*.jpg"))
    rows = predict(loaded, files, progress=False)
    test = load_arrays(_data(photos, resolution=64), progress=False).test  # what evaluation reads
    x = torch.from_numpy(test.images[np.arange(len(files))]).permute(0, 3, 1, 2)
    with torch.no_grad():
        probs = torch.softmax(loaded.model(loaded.inputs(x)).float(), 1)
    np.testing.assert_allclose([r["probability"] for r in rows], probs.max(1).values.numpy(), rtol=1e-5)


def test_the_device_loader_refuses_photos(photos, tmp_path):
    cfg = tiny_config(tmp_path / "run", **{"data.dataset": f"imagefolder:{photos}", "data.loader": "device"})
    with pytest.raises(ConfigError, match="--loader torch"):
        build_run(cfg, progress=False)


def test_resized_crops_are_refused_for_fixed_size_datasets():
    with pytest.raises(DataError, match="imagefolder"):
        load_arrays(DataConfig(dataset="synthetic", crop="resized"), progress=False)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--crop-scale", ["0.5", "0.2"], "data.crop_scale"), ("--crop-pct", ["1.5"], "data.crop_pct")],
)
def test_bad_crop_options_are_one_line_errors(flag, value, message, capsys):
    assert main(["train", flag, *value, "--print-config"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_random_user_transform_is_refused_not_frozen():
    from torchvision.datasets import FakeData

    from quicktrain.data.objects import arrays_from_datasets

    flip = FakeData(8, (3, 16, 16), 2, transform=v2.Compose([v2.RandomHorizontalFlip(), v2.ToImage()]))
    with pytest.raises(DataError, match="RandomHorizontalFlip.*imagefolder"):
        arrays_from_datasets(flip, None)

    class Noisy(torch.utils.data.Dataset):  # random without a transform attribute
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.rand(3, 8, 8), i % 2

    with pytest.raises(DataError, match="differs between reads"):
        arrays_from_datasets(Noisy(), None)
    fixed = FakeData(8, (3, 16, 16), 2, transform=v2.Compose([v2.ToImage()]))
    assert arrays_from_datasets(fixed, None).train.images.shape == (8, 16, 16, 3)


def test_the_banner_and_summary_json_say_the_source_sizes(photos, tmp_path):
    out = tmp_path / "cli"
    args = ["--model", "test_resnet", "--epochs", "1", "--batch-size", "6", "--amp", "off", "--no-progress"]
    code = main(["train", "--dataset", f"imagefolder:{photos}", *args, "--no-tensorboard", "--out", str(out)])
    assert code == 0
    sizes = json.loads((out / "summary.json").read_text())["input"]["source_sizes"]
    assert set(sizes) == {"files", "measured", "min", "median", "max"} and sizes["measured"] == 18
