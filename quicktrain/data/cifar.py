"""CIFAR-10 and CIFAR-100 in torchvision's on-disk format (the "python version" pickles).

    DATA_DIR/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}
    DATA_DIR/cifar-100-python/{train, test, meta}

We read the pickles ourselves, through an unpickler that only rebuilds numpy arrays, so a
tampered file cannot run code, and so files we generate in tests need not match the
official checksums. ``download=True`` lets torchvision fetch and verify the real archive.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import ClassVar

import numpy as np

from quicktrain.data.arrays import Arrays, Split
from quicktrain.errors import DataError

_LAYOUT = {
    "cifar10": {
        "folder": "cifar-10-batches-py",
        "train": [f"data_batch_{i}" for i in range(1, 6)],
        "test": ["test_batch"],
        "meta": ("batches.meta", "label_names"),
        "labels": "labels",
    },
    "cifar100": {
        "folder": "cifar-100-python",
        "train": ["train"],
        "test": ["test"],
        "meta": ("meta", "fine_label_names"),
        "labels": "fine_labels",
    },
}


class _ArrayUnpickler(pickle.Unpickler):
    """Allows only what the CIFAR pickles hold: dicts, lists, bytes and numpy arrays."""

    _allowed: ClassVar[set[tuple[str, str]]] = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # how protocol-2 pickles written by Python 3 store bytes
    }

    def find_class(self, module: str, name: str):
        if (module, name) in self._allowed:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a CIFAR file")


def _read_pickle(path: Path) -> dict:
    try:
        with path.open("rb") as f:
            return _ArrayUnpickler(f, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError) as err:
        raise DataError(f"'{path}' is not a readable CIFAR pickle ({err})") from None


def load_cifar(name: str, data_dir: str | Path, download: bool = False, load_test: bool = True) -> Arrays:
    """Load ``cifar10`` or ``cifar100`` from ``data_dir``; download first if asked. The test
    batch is not read when ``load_test`` is false."""
    layout = _LAYOUT[name]
    root = Path(data_dir).expanduser()
    folder = root / layout["folder"]
    if download:
        _download(name, root)
    missing = [f for f in layout["train"] + layout["test"] if not (folder / f).is_file()]
    if missing:
        raise DataError(
            f"{name} not found: '{folder / missing[0]}' is missing; pass --download when online, "
            f"or put the extracted python-version archive under --data-dir {root}"
        )
    parts = ("train", "test") if load_test else ("train",)
    splits = {part: _read_split(folder, layout[part], layout["labels"]) for part in parts}
    meta_file, meta_key = layout["meta"]
    classes = _class_names(folder / meta_file, meta_key, splits["train"])
    return Arrays(name, classes, splits["train"], splits.get("test"), source=str(folder))


def _read_split(folder: Path, files: list[str], label_key: str) -> Split:
    images, labels = [], []
    for file in files:
        entry = _read_pickle(folder / file)
        data = np.asarray(entry["data"], dtype=np.uint8)
        # stored as (N, 3072): a 32x32 red plane, then green, then blue
        images.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(np.asarray(entry[label_key], dtype=np.int64))
    return Split(np.ascontiguousarray(np.concatenate(images)), np.concatenate(labels))


def _class_names(meta: Path, key: str, train: Split) -> tuple[str, ...]:
    if meta.is_file():
        return tuple(_read_pickle(meta)[key])
    return tuple(str(c) for c in range(int(train.labels.max()) + 1))


def _download(name: str, root: Path) -> None:
    from torchvision import datasets  # imported here: only the download path needs it

    cls = datasets.CIFAR10 if name == "cifar10" else datasets.CIFAR100
    try:
        cls(str(root), train=True, download=True)
    except Exception as err:  # network errors come in many types
        raise DataError(f"downloading {name} into '{root}' failed: {err}") from None
