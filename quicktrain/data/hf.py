"""``hf:DIR`` datasets: a Hugging Face ``datasets`` DatasetDict saved with ``save_to_disk``.

Splits ``train`` and ``test`` (or ``validation`` / ``val``), an image column (the first of type
``datasets.Image``, or the one named ``image``/``img``) and a label column of type ``ClassLabel``
(``label`` if there is one), whose names are the class names. The Arrow files are memory-mapped as
``datasets`` does (``load_from_disk``); every row becomes a reference (folder, split, row) whose
encoded image bytes are read, undecoded, when a store build or loader worker needs them, so the
rest is the image folder's path (:func:`quicktrain.data.imagefolder.arrays_from_listings`): photos
through the memory-mapped store or streamed, thumbnails into memory, the same crops.

Every bad split or column is one line naming it: a split missing, an image column that is not
images, no ClassLabel column, a label out of range (``-1``, datasets' "no label", included).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from quicktrain.data.arrays import Arrays
from quicktrain.data.imagefolder import HELD_OUT, Listing, Reading, arrays_from_listings
from quicktrain.errors import ConfigError, DataError

_OPEN: dict[tuple[str, str], Any] = {}  # (folder, split) -> the split, undecoded, once per process


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ConfigError("hf:DIR needs the datasets library: pip install 'quicktrain[hf]'") from None
    return datasets


def _split(folder: str, split: str, column: str) -> Any:
    key = (folder, split)
    if key not in _OPEN:
        datasets = _datasets()
        table = datasets.load_from_disk(folder)[split]
        _OPEN[key] = table.cast_column(column, datasets.Image(decode=False)).select_columns([column])
    return _OPEN[key]


@dataclass(frozen=True)
class ArrowRow:
    """One image in a saved dataset: a :class:`~quicktrain.data.decode.ByteRef`."""

    folder: str
    split: str
    row: int
    column: str
    fingerprint: str

    @property
    def name(self) -> str:
        return f"hf:{self.folder} {self.split}[{self.row}]"

    def read(self) -> bytes:
        value = _split(self.folder, self.split, self.column)[self.row][self.column]
        if value.get("bytes") is not None:
            return value["bytes"]
        if value.get("path"):
            return Path(value["path"]).read_bytes()  # a dataset that keeps paths to image files
        raise DataError(f"{self.name} holds no image (neither bytes nor a path)")

    def identity(self) -> str:
        return f"{self.folder}|{self.split}|{self.fingerprint}|{self.row}"

    def nbytes(self) -> int:
        return len(self.read())


def _columns(table: Any, where: str) -> tuple[str, str]:
    """(image column, label column) of one split."""
    datasets = _datasets()
    features = table.features
    images = [name for name, f in features.items() if isinstance(f, datasets.Image)]
    named = [name for name in ("image", "img") if name in features]
    if not images:
        if named:
            raise DataError(f"column '{named[0]}' of {where} is {features[named[0]]}, not images (datasets.Image)")
        raise DataError(f"{where} has no image column (datasets.Image); its columns: {', '.join(features)}")
    labels = [name for name, f in features.items() if isinstance(f, datasets.ClassLabel)]
    if not labels:
        raise DataError(f"{where} has no ClassLabel column to take labels and class names from")
    image = named[0] if named and named[0] in images else images[0]
    return image, "label" if "label" in labels else labels[0]


def _listing(folder: str, split: str, table: Any, classes: list[str] | None) -> Listing:
    where = f"hf:{folder} split '{split}'"
    image, label = _columns(table, where)
    names = list(table.features[label].names)
    if classes is not None and names != classes:
        raise DataError(f"the class names of {where} differ from the training split's")
    labels = np.asarray(table[label], dtype=np.int64)
    bad = np.flatnonzero((labels < 0) | (labels >= len(names)))
    if len(bad):
        raise DataError(f"{where} row {int(bad[0])}: label {int(labels[bad[0]])} is out of range (0-{len(names) - 1})")
    refs = [ArrowRow(folder, split, row, image, table._fingerprint) for row in range(len(table))]
    return Listing(names, refs, labels)


def load_hf(path: str | Path, reading: Reading) -> Arrays:
    root = Path(path).expanduser()
    if not (root / "dataset_dict.json").is_file():
        raise DataError(f"hf:{root} is not a DatasetDict saved with save_to_disk (no dataset_dict.json)")
    datasets = _datasets()
    try:
        splits = datasets.load_from_disk(str(root))
    except Exception as err:  # datasets raises several kinds for a damaged folder
        detail = " ".join(str(err).split())[:120]
        raise DataError(f"hf:{root} cannot be loaded: {type(err).__name__}: {detail}") from None
    if "train" not in splits:
        raise DataError(f"hf:{root} has no 'train' split; it has {', '.join(splits)}")
    folder = str(root.resolve())
    train = _listing(folder, "train", splits["train"], None)
    if not train.paths:
        raise DataError(f"the 'train' split of hf:{root} has no rows")
    test, notes = None, []
    if reading.load_test:
        names = HELD_OUT if reading.photo.eval_split == "auto" else (reading.photo.eval_split,)
        held_out = next((name for name in names if name in splits), None)
        if held_out is None:
            raise DataError(f"hf:{root} has no held-out split ({' or '.join(names)}); it has {', '.join(splits)}")
        test = _listing(folder, held_out, splits[held_out], train.classes)
        notes.append(f"held-out split: {held_out}")
    return arrays_from_listings(f"hf:{root}", str(root), train, test, reading, tuple(notes))
