"""Datasets in their real on-disk formats, augmentation by hand, loader order and seeding."""

import os
import pickle
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from quicktrain.config import DataConfig
from quicktrain.data import imagefolder
from quicktrain.data.augment import CropFlip, crop_flip
from quicktrain.data.loader import make_loader, set_epoch
from quicktrain.data.sources import load_arrays
from quicktrain.errors import DataError


# ---- CIFAR in torchvision's layout ---------------------------------------------------------
def _write_cifar(root, name, per_file=20, seed=0):
    rng = np.random.default_rng(seed)
    if name == "cifar10":
        folder, train, test = root / "cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"]
        label_key, meta = "labels", ("batches.meta", "label_names", [f"c{i}" for i in range(10)])
        num_classes = 10
    else:
        folder, train, test = root / "cifar-100-python", ["train"], ["test"]
        label_key, meta = "fine_labels", ("meta", "fine_label_names", [f"f{i}" for i in range(100)])
        num_classes = 100
    folder.mkdir(parents=True)
    expected = {}
    for file in train + test:
        data = rng.integers(0, 256, size=(per_file, 3072), dtype=np.uint8)
        labels = rng.integers(0, num_classes, size=per_file).tolist()
        with (folder / file).open("wb") as f:
            pickle.dump({"data": data, label_key: labels, "batch_label": file}, f, protocol=2)
        expected[file] = (data, labels)
    with (folder / meta[0]).open("wb") as f:
        pickle.dump({meta[1]: meta[2]}, f, protocol=2)
    return expected, train, test, meta[2]


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_reads_the_real_pickle_layout(tmp_path, name):
    expected, train_files, test_files, classes = _write_cifar(tmp_path, name)
    arrays = load_arrays(DataConfig(dataset=name, data_dir=str(tmp_path)))
    assert arrays.classes == tuple(classes)
    assert len(arrays.train) == 20 * len(train_files) and len(arrays.test) == 20
    data, labels = expected[train_files[0]]
    # row 0: red plane, then green, then blue, each 32x32 row-major
    first = data[0].reshape(3, 32, 32).transpose(1, 2, 0)
    np.testing.assert_array_equal(arrays.train.images[0], first)
    assert arrays.train.labels[: len(labels)].tolist() == labels
    assert arrays.test.labels.tolist() == expected[test_files[0]][1]


def test_cifar_missing_offline_says_how_to_provide_it(tmp_path):
    with pytest.raises(DataError, match="--download") as err:
        load_arrays(DataConfig(dataset="cifar10", data_dir=str(tmp_path)))
    assert "\n" not in str(err.value)


def test_cifar_refuses_a_pickle_that_would_run_code(tmp_path):
    _write_cifar(tmp_path, "cifar10")

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with (tmp_path / "cifar-10-batches-py" / "test_batch").open("wb") as f:
        pickle.dump({"data": Evil()}, f)
    with pytest.raises(DataError, match="refusing to load"):
        load_arrays(DataConfig(dataset="cifar10", data_dir=str(tmp_path)))


# ---- imagefolder ------------------------------------------------------------------------------
def _write_folder(root, classes=("cat", "dog", "frog"), per_class=4, size=32, fmt="PNG"):
    rng = np.random.default_rng(0)
    pixels = {}
    for split in ("train", "test"):
        for c in classes:
            (root / split / c).mkdir(parents=True)
            for i in range(per_class):
                img = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
                path = root / split / c / f"{i:04d}.{fmt.lower()}"
                Image.fromarray(img).save(path, format=fmt)
                pixels[path] = img
    return pixels


def test_imagefolder_decodes_labels_and_caches(tmp_path, monkeypatch):
    pixels = _write_folder(tmp_path / "ds")
    (tmp_path / "ds" / "train" / "cat" / "notes.txt").write_text("not an image")
    cfg = DataConfig(dataset=f"imagefolder:{tmp_path / 'ds'}")
    arrays = load_arrays(cfg, progress=False)
    assert arrays.classes == ("cat", "dog", "frog")
    assert len(arrays.train) == 12 and len(arrays.test) == 12
    assert arrays.train.labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    np.testing.assert_array_equal(arrays.train.images[5], pixels[tmp_path / "ds" / "train" / "dog" / "0001.png"])
    # second load comes from the cache: decoding is not called again
    monkeypatch.setattr(imagefolder, "decode_image", lambda *a: pytest.fail("decoded twice"))
    again = load_arrays(cfg, progress=False)
    np.testing.assert_array_equal(again.train.images, arrays.train.images)


def test_a_damaged_cache_file_is_reported_once_and_rebuilt(tmp_path, monkeypatch, quicktrain_log):
    _write_folder(tmp_path / "ds")
    cache = tmp_path / "cache"
    cfg = DataConfig(dataset=f"imagefolder:{tmp_path / 'ds'}", cache_dir=str(cache))
    first = load_arrays(cfg, progress=False)
    files = sorted(cache.glob("imagefolder-*.npz"))
    assert files
    for f in files:  # a copy cut short: the zip directory at the end is gone
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    quicktrain_log.clear()
    again = load_arrays(cfg, progress=False)
    np.testing.assert_array_equal(again.train.images, first.train.images)
    damaged = sorted({r.getMessage() for r in quicktrain_log.records if "is damaged" in r.getMessage()})
    assert len(damaged) == len(files) and all("rebuilding it" in m for m in damaged)  # once per file
    # rebuilt: the next load reads the cache without decoding or warning
    monkeypatch.setattr(imagefolder, "decode_image", lambda *a: pytest.fail("decoded again"))
    np.testing.assert_array_equal(load_arrays(cfg, progress=False).test.images, first.test.images)


def test_imagefolder_subset_is_balanced_and_resizes(tmp_path):
    _write_folder(tmp_path / "ds", per_class=6, size=40, fmt="JPEG")
    cfg = DataConfig(dataset=f"imagefolder:{tmp_path / 'ds'}", max_train_samples=9, max_test_samples=3)
    assert load_arrays(cfg, progress=False).train.images.shape == (9, 40, 40, 3)  # thumbnails: their own size
    cfg = DataConfig(dataset=f"imagefolder:{tmp_path / 'ds'}", max_train_samples=9, max_test_samples=3, resolution=32)
    arrays = load_arrays(cfg, progress=False)
    assert arrays.train.images.shape == (9, 32, 32, 3) and arrays.crop == "pad"
    assert np.bincount(arrays.train.labels).tolist() == [3, 3, 3]
    assert np.bincount(arrays.test.labels).tolist() == [1, 1, 1]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: None, "does not exist"),
        (lambda root: _write_folder(root) and shutil.rmtree(root / "test"), "'.*test' is not a folder"),
        (lambda root: _write_folder(root, classes=("a",)) and (root / "test" / "b").mkdir(), "class folders differ"),
        (
            lambda root: [(root / s / "a").mkdir(parents=True) for s in ("train", "test")],
            "no image file in the class folder",
        ),
    ],
)
def test_imagefolder_bad_layouts_are_one_line_errors(tmp_path, make, message):
    root = tmp_path / "ds"
    make(root)
    with pytest.raises(DataError, match=message) as err:
        load_arrays(DataConfig(dataset=f"imagefolder:{root}"), progress=False)
    assert "\n" not in str(err.value)


def test_imagefolder_corrupt_image_names_the_file(tmp_path):
    _write_folder(tmp_path / "ds")
    bad = tmp_path / "ds" / "train" / "dog" / "0002.png"
    bad.write_bytes(b"\x89PNG truncated")
    with pytest.raises(DataError, match="0002.png"):
        load_arrays(DataConfig(dataset=f"imagefolder:{tmp_path / 'ds'}"), progress=False)


# ---- sample and synthetic -----------------------------------------------------------------------
def test_bundled_sample_is_balanced_real_cifar10():
    arrays = load_arrays(DataConfig(dataset="sample"))
    assert arrays.classes[0] == "airplane" and arrays.num_classes == 10
    assert arrays.train.images.shape == (2000, 32, 32, 3) and len(arrays.test) == 500
    assert np.bincount(arrays.train.labels).tolist() == [200] * 10
    assert np.bincount(arrays.test.labels).tolist() == [50] * 10
    assert 60 < arrays.train.images.mean() < 200  # real photos, not blank
    from quicktrain.data.sample import SAMPLE_FILE

    assert SAMPLE_FILE.stat().st_size < 3_000_000


def test_synthetic_is_deterministic_and_sized():
    a = load_arrays(DataConfig(dataset="synthetic", max_train_samples=50, max_test_samples=20))
    b = load_arrays(DataConfig(dataset="synthetic", max_train_samples=50, max_test_samples=20))
    assert len(a.train) == 50 and len(a.test) == 20
    np.testing.assert_array_equal(a.train.images, b.train.images)


def test_unknown_dataset_lists_the_accepted_ones():
    accepted = "accepted: sample, synthetic, synthetic:CLASSES, mnist5k, digits, cifar10, cifar100, imagefolder:PATH"
    with pytest.raises(DataError, match=accepted):
        load_arrays(DataConfig(dataset="mnist"))


# ---- augmentation and loader ---------------------------------------------------------------------
def test_crop_at_a_known_offset_and_flip():
    img = np.arange(2 * 4 * 4).reshape(2, 4, 4, 1).astype(np.uint8)
    out = crop_flip(img, dy=np.array([2, 0]), dx=np.array([1, 2]), flip=np.array([False, True]), pad=1)
    # sample 0: shifted up by one row (dy=2 of pad 1), columns unchanged, last row is padding
    np.testing.assert_array_equal(out[0, :3, :, 0], img[0, 1:, :, 0])
    assert (out[0, 3] == 0).all()
    # sample 1: padding row on top, then columns 1..3 + a padding column, mirrored
    assert (out[1, 0] == 0).all()
    np.testing.assert_array_equal(out[1, 1:, 1:, 0], img[1, :3, 1:, 0][:, ::-1])
    assert (out[1, :, 0] == 0).all()
    centre = CropFlip.identity(2, pad=1)
    np.testing.assert_array_equal(crop_flip(img, centre.dy, centre.dx, centre.flip, pad=1), img)


def _epoch(loader, epoch):
    set_epoch(loader, epoch)
    xs, ys = zip(*loader)
    return torch.cat(xs), torch.cat(ys)


def test_loader_order_and_augmentation_do_not_depend_on_batch_size():
    split = load_arrays(DataConfig(dataset="synthetic", max_train_samples=50)).train
    x32, y32 = _epoch(make_loader(split, 32, train=True, seed=3), 1)
    x8, y8 = _epoch(make_loader(split, 8, train=True, seed=3), 1)
    assert torch.equal(x32, x8) and torch.equal(y32, y8)


def test_each_sample_exactly_once_per_epoch_and_epochs_differ():
    split = load_arrays(DataConfig(dataset="synthetic", max_train_samples=50)).train
    loader = make_loader(split, 16, train=True, seed=0, augment=False)
    x1, _ = _epoch(loader, 0)
    x2, _ = _epoch(loader, 1)
    as_rows = lambda x: sorted(map(bytes, x.permute(0, 2, 3, 1).reshape(len(x), -1).numpy()))  # noqa: E731
    assert as_rows(x1) == as_rows(torch.from_numpy(split.images).permute(0, 3, 1, 2))
    assert not torch.equal(x1, x2) and as_rows(x1) == as_rows(x2)


def test_same_seed_same_epoch_is_identical_with_workers():
    split = load_arrays(DataConfig(dataset="synthetic", max_train_samples=40)).train
    a = _epoch(make_loader(split, 8, train=True, seed=5, workers=0), 2)
    b = _epoch(make_loader(split, 8, train=True, seed=5, workers=2), 2)
    c = _epoch(make_loader(split, 8, train=True, seed=6, workers=0), 2)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_test_loader_keeps_order_and_pixels():
    split = load_arrays(DataConfig(dataset="synthetic", max_test_samples=30)).test
    x, y = _epoch(make_loader(split, 7, train=False, seed=0), 4)
    assert torch.equal(x, torch.from_numpy(split.images).permute(0, 3, 1, 2))
    assert torch.equal(y, torch.from_numpy(split.labels))


def test_synthetic_takes_a_class_count():
    arrays = load_arrays(DataConfig(dataset="synthetic:100", max_train_samples=200, max_test_samples=100))
    assert arrays.num_classes == 100 and set(arrays.train.labels) == set(range(100))
    with pytest.raises(DataError, match="synthetic:x"):
        load_arrays(DataConfig(dataset="synthetic:x"))


# ---- the dataset registry ---------------------------------------------------------------------
def test_a_registered_dataset_loads_by_name_and_prefix_and_is_listed():
    from quicktrain.data.registry import DatasetEntry, names, register_dataset, unregister_dataset
    from quicktrain.data.synthetic import make_synthetic

    seen = []

    def shards(cfg, argument, progress, size_hint):
        seen.append(argument)
        return make_synthetic(40, 20, num_classes=4)

    register_dataset(DatasetEntry("myshards", "test shards", shards, "DIR"))
    try:
        assert "myshards:DIR" in names()
        arrays = load_arrays(DataConfig(dataset="myshards:some/dir", max_train_samples=8), progress=False)
        assert seen == ["some/dir"] and len(arrays.train) == 8 and arrays.num_classes == 4  # subset after loading
        with pytest.raises(DataError, match="myshards needs a dir"):
            load_arrays(DataConfig(dataset="myshards"), progress=False)
        with pytest.raises(DataError, match=r"data.crop=resized is for imagefolder"):
            load_arrays(DataConfig(dataset="myshards:x", crop="resized"), progress=False)
        with pytest.raises(ValueError, match="already registered"):
            register_dataset(DatasetEntry("cifar10", "again", shards))
    finally:
        unregister_dataset("myshards")
    with pytest.raises(DataError, match="unknown dataset 'myshards:x'; accepted: sample, synthetic"):
        load_arrays(DataConfig(dataset="myshards:x"), progress=False)
    with pytest.raises(DataError, match="unknown dataset 'cifar10:x'"):
        load_arrays(DataConfig(dataset="cifar10:x"), progress=False)
