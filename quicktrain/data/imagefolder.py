"""``imagefolder:PATH`` datasets: ``PATH/train/<class>/*`` and ``PATH/test/<class>/*`` (or
``PATH/val/<class>/*`` as the held-out split when there is no ``test/``).

In memory (``data.data_mode=memory``), images are decoded once with Pillow into uint8 arrays
and cached (``.npz`` keyed by the folder, the files' names, sizes and modification times, and
the decode resolution), so the next run starts in a second instead of decoding 60,000 JPEGs
again. Streamed (``stream``, or ``auto`` when the decoded set would not fit the memory
budget), only the file list is kept and each batch is decoded when it is loaded
(:mod:`quicktrain.data.stream`).
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm import tqdm

from quicktrain.data.arrays import Arrays, Split, balanced_subset
from quicktrain.data.cache import atomic_save_npz, cache_root, load_cached
from quicktrain.data.stream import FileImages, decoded_bytes, memory_budget_bytes
from quicktrain.errors import DataError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif", ".tif", ".tiff", ".ppm"}


def list_split(root: Path, split: str) -> tuple[list[str], list[Path], np.ndarray]:
    """Class names, image paths and labels of ``root/split`` in a sorted, stable order."""
    folder = root / split
    if not folder.is_dir():
        raise DataError(f"'{folder}' is not a folder; imagefolder:PATH needs PATH/{split}/<class>/")
    classes = sorted(d.name for d in folder.iterdir() if d.is_dir())
    if not classes:
        raise DataError(f"'{folder}' has no class folders; expected {folder}/<class>/<image>")
    paths, labels = [], []
    for label, name in enumerate(classes):
        files = sorted(p for p in (folder / name).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        paths += files
        labels += [label] * len(files)
    if not paths:
        raise DataError(f"'{folder}' holds no image files ({', '.join(sorted(IMAGE_SUFFIXES))})")
    return classes, paths, np.asarray(labels, dtype=np.int64)


def load_imagefolder(
    path: str | Path,
    resolution: int = 32,
    max_train: int | None = None,
    max_test: int | None = None,
    cache_dir: str | None = None,
    progress: bool = True,
    load_test: bool = True,
    mode: str = "memory",
) -> Arrays:
    """``mode``: memory, stream, or auto (stream when the decoded splits exceed the budget)."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise DataError(f"imagefolder path '{root}' does not exist or is not a folder")
    train_classes, train_paths, train_labels = list_split(root, "train")
    parts = [(train_paths, train_labels, max_train)]
    held_out = "test" if (root / "test").is_dir() or not (root / "val").is_dir() else "val"
    if load_test:  # otherwise the test folder is not even listed
        test_classes, test_paths, test_labels = list_split(root, held_out)
        if train_classes != test_classes:
            only = sorted(set(train_classes) ^ set(test_classes))
            raise DataError(
                f"class folders differ between '{root / 'train'}' and '{root / held_out}': {', '.join(only)}"
            )
        parts.append((test_paths, test_labels, max_test))
    chosen = [(balanced_subset(labels, limit), paths, labels) for paths, labels, limit in parts]
    stream = _choose_stream(mode, sum(len(keep) for keep, _, _ in chosen), resolution)
    splits = []
    for keep, paths, labels in chosen:
        files = [paths[i] for i in keep]
        images = FileImages(files, resolution) if stream else _decode_cached(files, resolution, cache_dir, progress)
        splits.append(Split(images, labels[keep]))
    test = splits[1] if load_test else None
    return Arrays(f"imagefolder:{root}", tuple(train_classes), splits[0], test, source=str(root))


def _choose_stream(mode: str, count: int, resolution: int) -> bool:
    if mode != "auto":
        return mode == "stream"
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # torchrun: every process holds its own copy
    return decoded_bytes(count, resolution) > memory_budget_bytes(processes)


def _decode_cached(paths: list[Path], resolution: int, cache_dir: str | None, progress: bool) -> np.ndarray:
    key = hashlib.sha256(f"v1|{resolution}".encode())
    for p in paths:
        st = p.stat()
        key.update(f"|{p.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    cache_file = cache_root(cache_dir) / f"imagefolder-{key.hexdigest()[:24]}.npz"
    cached = load_cached(cache_file, "images")
    if cached is not None:
        return cached["images"]
    images = np.empty((len(paths), resolution, resolution, 3), dtype=np.uint8)
    bar = tqdm(paths, desc=f"decoding {paths[0].parent.parent.name}", unit="img", disable=not progress, leave=False)
    for i, p in enumerate(bar):
        images[i] = decode_image(p, resolution)
    atomic_save_npz(cache_file, images=images)
    return images


def decode_image(path: Path | bytes, resolution: int) -> np.ndarray:
    """One image file (or its bytes) as (resolution, resolution, 3) uint8 RGB."""
    source = io.BytesIO(path) if isinstance(path, bytes) else path
    try:
        with Image.open(source) as img:
            img = img.convert("RGB")
            if img.size != (resolution, resolution):
                img = img.resize((resolution, resolution), Image.BILINEAR)
            return np.asarray(img, dtype=np.uint8)
    except (OSError, ValueError) as err:
        name = "<bytes>" if isinstance(path, bytes) else str(path)
        raise DataError(f"cannot decode image '{name}': {err}") from None
