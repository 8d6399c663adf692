"""``wds:DIR`` (WebDataset shards) and ``hf:DIR`` (a saved Hugging Face DatasetDict): the right
counts, crops and class names through the image folder's store; one line for each bad shard or column."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import tiny_config
from test_photos import write_photos

from quicktrain.cli import main
from quicktrain.config import DataConfig
from quicktrain.data.sources import load_arrays
from quicktrain.engine import train
from quicktrain.errors import DataError


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_shards(photos: Path, out: Path, per_shard: int = 5, held_out: str = "test") -> Path:
    """The photo folder as shards: KEY.jpg + KEY.cls, samples of every class mixed in each shard."""
    out.mkdir(parents=True, exist_ok=True)
    for split, name in (("train", "train"), ("test", held_out)):
        files = sorted((photos / split).rglob("*.jpg"))
        samples = [(f, int(f.parent.name.removeprefix("class"))) for f in files]
        samples.sort(key=lambda s: (s[0].stem, s[1]))  # interleave the classes
        for shard, start in enumerate(range(0, len(samples), per_shard)):
            with tarfile.open(out / f"{name}-{shard:03d}.tar", "w") as tar:
                for i, (path, label) in enumerate(samples[start : start + per_shard]):
                    key = f"{start + i:06d}"
                    _add(tar, f"{key}.jpg", path.read_bytes())
                    _add(tar, f"{key}.cls", str(label).encode())
    return out


@pytest.fixture
def photos(tmp_path):
    return write_photos(tmp_path / "photos", per_class=6, low=90, high=140)


def _data(dataset: str, **extra) -> DataConfig:
    return DataConfig(dataset=dataset, resolution=64, **extra)


def _train_then_evaluate(tmp_path: Path, dataset: str, **overrides) -> dict:
    """Train a tiny run on ``dataset``; ``quicktrain evaluate`` on it must give the run's own test accuracy."""
    out = tmp_path / "run"
    summary = train(tiny_config(out, **{"data.dataset": dataset, "data.resolution": 64, **overrides})).summary
    assert main(["evaluate", str(out), "--dataset", dataset, "--out", str(tmp_path / "e")]) == 0
    report = json.loads((tmp_path / "e" / "evaluation.json").read_text())
    assert report["test_accuracy"] == pytest.approx(summary["test_accuracy"])
    return summary


def test_shards_load_like_the_folder_they_were_made_from(photos, tmp_path):
    shards = write_shards(photos, tmp_path / "shards")
    (shards / "classes.txt").write_text("class0\nclass1\nclass2\n")
    folder = load_arrays(_data(f"imagefolder:{photos}", store_format="raw"), progress=False)
    sharded = load_arrays(_data(f"wds:{shards}", store_format="raw"), progress=False)
    assert sharded.classes == folder.classes and sharded.crop == "resized"
    assert (len(sharded.train), len(sharded.test)) == (18, 9) == (len(folder.train), len(folder.test))
    assert np.bincount(sharded.train.labels).tolist() == [6, 6, 6]
    # the same images in shard order: the evaluation crops are the folder's, one for one
    crops = sharded.test.images[np.arange(9)]
    folder_crops = folder.test.images[np.arange(9)]
    assert sorted(c.tobytes() for c in crops) == sorted(c.tobytes() for c in folder_crops)
    assert any("2 training shards" in n or "4 training shards" in n for n in sharded.notes)


def test_a_wds_run_trains_and_evaluate_reads_the_shards(photos, tmp_path):
    shards = write_shards(photos, tmp_path / "shards", held_out="validation")
    summary = _train_then_evaluate(tmp_path, f"wds:{shards}", **{"model.name": "test_resnet"})
    assert summary["status"] == "completed" and summary["classes"] == ["0", "1", "2"]
    assert (
        summary["input"]["crop"] == "resized"
        and "held-out split: validation-*.tar (2 shards)" in summary["input"]["notes"]
    )


def test_every_bad_shard_is_one_line_naming_it(photos, tmp_path):
    good = write_shards(photos, tmp_path / "good")
    cases = tmp_path / "cases"

    def case(name: str, members: list[tuple[str, bytes]]) -> Path:
        root = cases / name
        root.mkdir(parents=True)
        for f in good.glob("test-*.tar"):
            (root / f.name).write_bytes(f.read_bytes())
        with tarfile.open(root / "train-000.tar", "w") as tar:
            for member, data in members:
                _add(tar, member, data)
        return root

    jpg = next(photos.rglob("*.jpg")).read_bytes()
    expect = {
        case("no-cls", [("a.jpg", jpg)]): "sample 'a' in shard .* has no .cls label",
        case("no-image", [("a.cls", b"0"), ("a.txt", b"x")]): "sample 'a' in shard .* has no image",
        case("text-label", [("a.jpg", jpg), ("a.cls", b"cat")]): "its .cls 'cat' is not an integer",
        case("negative", [("a.jpg", jpg), ("a.cls", b"-1")]): "label -1 is out of range",
        case("beyond-train", [("a.jpg", jpg), ("a.cls", b"0")]): "label [12] is out of range",  # test has 0-2
    }
    for root, message in expect.items():
        with pytest.raises(DataError, match=message):
            load_arrays(_data(f"wds:{root}"), progress=False)
    broken = cases / "broken"
    broken.mkdir()
    (broken / "train-000.tar").write_bytes(b"not a tar file at all" * 40)
    with pytest.raises(DataError, match="is not a readable tar file"):
        load_arrays(_data(f"wds:{broken}"), progress=False)
    lonely = cases / "lonely"
    lonely.mkdir()
    (lonely / "train-000.tar").write_bytes((good / "train-000.tar").read_bytes())
    with pytest.raises(DataError, match="no held-out shards"):
        load_arrays(_data(f"wds:{lonely}"), progress=False)


# ---- Hugging Face datasets -------------------------------------------------------------------
datasets = pytest.importorskip("datasets")


def write_hf(photos: Path, out: Path, held_out: str = "test") -> Path:
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=["red", "green", "blue"])}
    )
    splits = {}
    for split, name in (("train", "train"), ("test", held_out)):
        files = sorted((photos / split).rglob("*.jpg"))
        rows = {
            "image": [{"bytes": f.read_bytes(), "path": None} for f in files],
            "label": [int(f.parent.name.removeprefix("class")) for f in files],
        }
        splits[name] = datasets.Dataset.from_dict(rows, features=features)
    datasets.DatasetDict(splits).save_to_disk(str(out))
    return out


def test_a_saved_dataset_dict_trains_with_its_class_names(photos, tmp_path):
    saved = write_hf(photos, tmp_path / "hf", held_out="validation")
    arrays = load_arrays(_data(f"hf:{saved}", store_format="raw"), progress=False)
    folder = load_arrays(_data(f"imagefolder:{photos}", store_format="raw"), progress=False)
    assert arrays.classes == ("red", "green", "blue") and (len(arrays.train), len(arrays.test)) == (18, 9)
    np.testing.assert_array_equal(arrays.test.images[np.arange(9)], folder.test.images[np.arange(9)])
    summary = _train_then_evaluate(tmp_path, f"hf:{saved}")
    assert summary["classes"] == ["red", "green", "blue"] and summary["test_samples"] == 9


def test_every_bad_split_or_column_is_one_line(photos, tmp_path):
    good = write_hf(photos, tmp_path / "good")
    train_only = tmp_path / "train-only"
    datasets.DatasetDict({"train": datasets.load_from_disk(str(good))["train"]}).save_to_disk(str(train_only))
    with pytest.raises(DataError, match="has no held-out split"):
        load_arrays(_data(f"hf:{train_only}"), progress=False)
    strings = tmp_path / "strings"
    table = datasets.Dataset.from_dict(
        {"image": ["a.jpg"], "label": [0]},
        features=datasets.Features({"image": datasets.Value("string"), "label": datasets.ClassLabel(names=["a"])}),
    )
    datasets.DatasetDict({"train": table, "test": table}).save_to_disk(str(strings))
    with pytest.raises(DataError, match="column 'image' of .* is .*string.*not images"):
        load_arrays(_data(f"hf:{strings}"), progress=False)
    unlabelled = tmp_path / "unlabelled"
    table = datasets.load_from_disk(str(good))["train"].cast_column("label", datasets.Value("int64"))
    datasets.DatasetDict({"train": table, "test": table}).save_to_disk(str(unlabelled))
    with pytest.raises(DataError, match="no ClassLabel column"):
        load_arrays(_data(f"hf:{unlabelled}"), progress=False)
    missing = tmp_path / "missing"
    missing.mkdir()
    with pytest.raises(DataError, match="not a DatasetDict saved with save_to_disk"):
        load_arrays(_data(f"hf:{missing}"), progress=False)
