"""``imagefolder:PATH`` datasets: ``PATH/train/<class>/*`` and ``PATH/test/<class>/*`` (or
``PATH/validation/`` as timm names it, or ``PATH/val/``: the first that exists, or ``data.eval_split``).

Two kinds of folder, told apart from the headers of up to 256 training files (``data.crop=auto``):

* **Thumbnails** (square, at most 64 px: CIFAR or MNIST saved as files) are trained as CIFAR is:
  decoded at ``data.resolution`` (default: their own size), padded-and-cropped. In memory
  (``data.data_mode=memory``) they are decoded once into uint8 arrays and cached (``.npz``
  keyed by the folder, the files' names, sizes and modification times, and the resolution);
  streamed (``stream``, or ``auto`` when they would not fit the memory budget), each batch is
  decoded when it is loaded (:mod:`quicktrain.data.stream`).
* **Photos** (anything else) keep their aspect ratio: RandomResizedCrop for training, resize and
  centre crop for evaluation (:mod:`quicktrain.data.photo_crops`) at ``data.resolution`` (default:
  ``model.image_size``, else the median shorter side rounded down to a multiple of 32, at most
  224), read from a memory-mapped store of downscaled images built once in parallel
  (:mod:`quicktrain.data.photo_store`), or decoded per batch with ``data_mode=stream``.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from quicktrain.data.arrays import Arrays, Split, balanced_subset
from quicktrain.data.cache import atomic_save_npz, cache_root, load_cached
from quicktrain.data.decode import (
    IMAGE_SUFFIXES,
    Source,
    decode_image,
    digest_sources,
    list_images,
    opened,
    source_nbytes,
)
from quicktrain.data.photo_store import PhotoFiles, open_store
from quicktrain.data.stream import FileImages, decoded_bytes, memory_budget_bytes
from quicktrain.errors import DataError


@dataclass(frozen=True)
class Listing:
    """One split of an image folder: its classes, files (sorted, stable), labels, and how many of
    the files lie in subfolders of their class folder (``train/cat/2023/x.jpg``)."""

    classes: list[str]
    paths: list[Source]  # files; images in shards or tables are references (quicktrain.data.decode)
    labels: np.ndarray
    nested: int = 0


HELD_OUT = ("test", "validation", "val")  # searched in this order; validation is timm's name


def held_out_split(root: Path, asked: str = "auto") -> str:
    """The held-out split's folder name: ``asked``, else the first of :data:`HELD_OUT` under ``root``."""
    if asked != "auto":
        if not (root / asked).is_dir():
            raise DataError(f"data.eval_split={asked}: '{root / asked}' is not a folder")
        return asked
    return next((name for name in HELD_OUT if (root / name).is_dir()), "test")  # test: named in the error


def class_names(folder: Path, only: tuple[str, ...] | None = None) -> list[str]:
    """The class folders of one split, sorted; hidden ones are not classes. ``only`` must name some."""
    if not folder.is_dir():
        raise DataError(f"'{folder}' is not a folder; imagefolder:PATH needs PATH/{folder.name}/<class>/")
    present = sorted(d.name for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))
    if only is not None:
        missing = sorted(set(only) - set(present))
        if missing:
            raise DataError(
                f"data.classes names {', '.join(missing)}, not a class folder of '{folder}' (it has "
                f"{', '.join(present[:20]) or 'none'}{', ...' if len(present) > 20 else ''})"
            )
    classes = sorted(only) if only is not None else present
    if not classes:
        raise DataError(f"'{folder}' has no class folders; expected {folder}/<class>/<image>")
    return classes


def list_split(root: Path, split: str, only: tuple[str, ...] | None = None) -> Listing:
    """The images of ``root/split/<class>/``, subfolders included (torchvision's ImageFolder walks
    them too), hidden files and folders skipped (:mod:`quicktrain.data.decode`). A class folder
    without images is refused, naming it, unless ``only`` (``data.classes``) leaves it out."""
    folder = root / split
    classes = class_names(folder, only)
    paths, labels, nested, empty = [], [], 0, []
    for label, name in enumerate(classes):
        files, below = list_images(folder / name)
        paths += files
        labels += [label] * len(files)
        nested += below
        if not files:
            empty.append(name)
    if empty:
        shown = ", ".join(f"'{folder / name}'" for name in empty[:3]) + (", ..." if len(empty) > 3 else "")
        raise DataError(
            f"no image file in the class folder{'s' if len(empty) > 1 else ''} {shown} ({' '.join(IMAGE_SUFFIXES)}); "
            "remove it, or name the classes to train with --classes"
        )
    return Listing(classes, paths, np.asarray(labels, dtype=np.int64), nested)


def load_imagefolder(
    path: str | Path,
    resolution: int | None = None,
    max_train: int | None = None,
    max_test: int | None = None,
    cache_dir: str | None = None,
    progress: bool = True,
    load_test: bool = True,
    mode: str = "memory",
    photo: PhotoOptions | None = None,
) -> Arrays:
    """``mode``: memory, stream, or auto (stream when the decoded splits exceed the budget).
    ``resolution`` None: from the images (module doc); ``photo`` the photo pipeline's options."""
    reading = Reading(resolution, max_train, max_test, cache_dir, progress, load_test, mode, photo or PhotoOptions())
    return read_imagefolder(path, reading)


def read_imagefolder(path: str | Path, reading: Reading) -> Arrays:
    """An image folder read as ``reading`` says (what :func:`load_imagefolder` takes as arguments)."""
    photo, load_test = reading.photo, reading.load_test
    root = Path(path).expanduser()
    if not root.is_dir():
        raise DataError(f"imagefolder path '{root}' does not exist or is not a folder")
    held_out = held_out_split(root, photo.eval_split)
    if load_test:  # otherwise the test folder is not even listed
        names = class_names(root / "train", photo.classes), class_names(root / held_out, photo.classes)
        if names[0] != names[1]:
            only = sorted(set(names[0]) ^ set(names[1]))
            raise DataError(
                f"class folders differ between '{root / 'train'}' and '{root / held_out}': {', '.join(only)}"
            )
    train = list_split(root, "train", photo.classes)
    test = list_split(root, held_out, photo.classes) if load_test else None
    nested = f"{train.nested} of {len(train.paths)} training images from subfolders of their class folders"
    notes = ((f"held-out split: {held_out}/",) if load_test else ()) + ((nested,) if train.nested else ())
    return arrays_from_listings(f"imagefolder:{root}", str(root), train, test, reading, notes)


@dataclass(frozen=True)
class Reading:
    """How a listed dataset is read, whatever holds its images (folders, shards, tables)."""

    resolution: int | None = None  # data.resolution; None: from the images (module doc)
    max_train: int | None = None
    max_test: int | None = None
    cache_dir: str | None = None
    progress: bool = True
    load_test: bool = True
    mode: str = "memory"  # memory, stream or auto
    photo: PhotoOptions = field(default_factory=lambda: PhotoOptions())

    @classmethod
    def from_config(
        cls, cfg: Any, progress: bool, size_hint: int | None, classes: tuple[str, ...] | None = None
    ) -> Reading:
        """From a :class:`~quicktrain.config.DataConfig` (and the model's size, as the hint)."""
        photo = PhotoOptions(
            cfg.crop, cfg.crop_pct, cfg.store_size, size_hint, cfg.workers or None, classes, cfg.eval_split,
            cfg.store_format,
        )  # fmt: skip
        return cls(
            cfg.resolution, cfg.max_train_samples, cfg.max_test_samples, cfg.cache_dir, progress, cfg.load_test,
            cfg.data_mode, photo,
        )  # fmt: skip


def arrays_from_listings(
    name: str, root: str, train: Listing, test: Listing | None, reading: Reading, notes: tuple[str, ...] = ()
) -> Arrays:
    """Listed images (files, or images inside shards and tables) as a dataset: thumbnails decoded
    into memory or streamed, photos through the store or streamed (the module doc)."""
    photo, resolution, cache_dir, progress = reading.photo, reading.resolution, reading.cache_dir, reading.progress
    parts = [(train.paths, train.labels, reading.max_train)]
    if test is not None:
        parts.append((test.paths, test.labels, reading.max_test))
    chosen = [(balanced_subset(labels, limit), paths, labels) for paths, labels, limit in parts]
    train_files = [train.paths[i] for i in chosen[0][0]]
    probed = probe_sizes(train_files)
    crop = photo.crop if photo.crop != "auto" else ("pad" if looks_like_thumbnails(probed) else "resized")
    if crop == "pad":
        resolution = resolution or int(np.median(probed.max(axis=1)))
        stream = _choose_stream(reading.mode, sum(len(keep) for keep, _, _ in chosen), resolution)
    else:
        resolution = resolution or photo.size_hint or default_photo_size(probed)
        side = photo.store_side(resolution)
        stream = reading.mode == "stream"
    splits, sizes, notes = [], size_summary(probed, len(train_files)), list(notes)
    if crop == "resized" and not stream:
        fmt, why = choose_store_format(photo.store_format, probed, side, train_files, cache_dir)
        notes.append(f"photo store: {fmt}, {why}")
    for keep, paths, labels in chosen:
        files = [paths[i] for i in keep]
        if crop == "resized" and stream:
            images = PhotoFiles(files, side, resolution, photo.crop_pct)
        elif crop == "resized":
            need = _store_bytes(probed, side, len(files))
            need = need if fmt == "raw" else need // 6  # a JPEG at quality 90: about a sixth of its pixels
            images = open_store(files, side, resolution, photo.crop_pct, cache_dir, photo.workers, progress, need, fmt)
            if not splits:  # the training store knows every source size, not just the probed ones
                sizes = size_summary(images.source_sizes(), len(files))
        elif stream:
            images = FileImages(files, resolution)
        else:
            images = _decode_cached(files, resolution, cache_dir, progress)
        splits.append(Split(images, labels[keep]))
    return Arrays(
        name,
        tuple(train.classes),
        splits[0],
        splits[1] if test is not None else None,
        root,
        crop=crop,
        source_sizes=sizes,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class PhotoOptions:
    """How a folder of photos is cropped and stored (config ``data.crop``, ``crop_pct``, ``store_size``)."""

    crop: str = "auto"  # auto, pad or resized
    crop_pct: float = 0.875
    store_size: int | None = None  # the store's shorter side; None: store_side()'s default
    size_hint: int | None = None  # model.image_size: the training size when data.resolution is not given
    workers: int | None = None  # processes that build the store; None: every CPU
    classes: tuple[str, ...] | None = None  # data.classes: the class folders to use; None: all
    eval_split: str = "auto"  # data.eval_split: the held-out folder's name
    store_format: str = "auto"  # data.store_format: raw, jpeg, or auto (choose_store_format)

    def store_side(self, size: int) -> int:
        """The stored shorter side: given, or enough for the evaluation crop (size / crop_pct) and
        1.15x the training size (FFCV's margin for the training crops), whichever is larger."""
        return self.store_size or max(math.floor(size / self.crop_pct), math.ceil(1.15 * size))


PROBE_LIMIT = 256  # files whose headers decide the crop and default size (evenly spread)
THUMBNAIL_SIDE = 64  # square images up to this side are trained CIFAR-style


def probe_sizes(paths: list[Path], limit: int = PROBE_LIMIT) -> np.ndarray:
    """(height, width) of up to ``limit`` of ``paths``, evenly spread; from headers, no decoding."""
    step = max(1, len(paths) // limit)
    sizes = []
    for p in paths[::step][:limit]:
        with opened(p) as img:
            sizes.append((img.size[1], img.size[0]))
    return np.asarray(sizes, dtype=np.int64).reshape(-1, 2)


def looks_like_thumbnails(sizes: np.ndarray) -> bool:
    """Square and small (CIFAR, MNIST exported as files): trained with pad-and-crop at their size."""
    return bool((sizes[:, 0] == sizes[:, 1]).all() and sizes.max() <= THUMBNAIL_SIDE)


def default_photo_size(sizes: np.ndarray) -> int:
    """The training size a photo folder gets by default: the median shorter side rounded down to a
    multiple of 32, at most 224 (ImageNet's) and at least 32."""
    return int(min(224, max(32, int(np.median(sizes.min(axis=1))) // 32 * 32)))


def size_summary(sizes: np.ndarray, total: int) -> dict:
    """min / median / max of the source widths and heights (of ``len(sizes)`` of ``total`` files)."""
    h, w = sizes[:, 0], sizes[:, 1]
    pick = {"min": np.min, "median": np.median, "max": np.max}
    return {"files": total, "measured": len(sizes), **{k: [int(f(w)), int(f(h))] for k, f in pick.items()}}


def describe_sizes(sizes: dict) -> str:
    """'source 300x225 .. 640x480 px (median 512x384)' for the banner."""
    lo, mid, hi = ("x".join(map(str, sizes[k])) for k in ("min", "median", "max"))
    measured = "" if sizes["measured"] == sizes["files"] else f", {sizes['measured']} of {sizes['files']} measured"
    return f"source {lo} .. {hi} px (median {mid}{measured})"


RAW_LIMIT = 2.0  # auto keeps raw pixels up to this many times the source files' bytes


def choose_store_format(
    asked: str, probed: np.ndarray, side: int, files: list[Path], cache_dir: str | None
) -> tuple[str, str]:
    """(format, why) of the training split's photo store: ``asked``, or for ``auto`` raw when its
    pixels take at most :data:`RAW_LIMIT` x the source files and half the free disk, else jpeg."""
    if asked != "auto":
        return asked, "as asked (--store-format)"
    step = max(1, len(files) // PROBE_LIMIT)
    sample = files[::step][:PROBE_LIMIT]
    source = sum(source_nbytes(p) for p in sample) / max(len(sample), 1) * len(files)
    raw = _store_bytes(probed, side, len(files))
    ratio = raw / max(source, 1.0)
    free = shutil.disk_usage(cache_root(cache_dir)).free
    sizes = f"raw pixels {_bytes(raw)}, {ratio:.1f}x the source files' {_bytes(source)}"
    if ratio <= RAW_LIMIT and raw <= free / 2:
        return "raw", f"{sizes} (auto: raw up to {RAW_LIMIT:g}x and half the free disk)"
    too_big = f"over {RAW_LIMIT:g}x" if ratio > RAW_LIMIT else "over half the free disk"
    return "jpeg", f"{sizes}: {too_big} (auto)"


def _bytes(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _store_bytes(probed: np.ndarray, side: int, count: int) -> int:
    """About how many bytes ``count`` images like the probed ones take in a store of ``side``."""
    scale = np.minimum(1.0, side / probed.min(axis=1).astype(np.float64))
    return int(count * float(np.mean(probed[:, 0] * scale * probed[:, 1] * scale)) * 3)


def _choose_stream(mode: str, count: int, resolution: int) -> bool:
    if mode != "auto":
        return mode == "stream"
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # torchrun: every process holds its own copy
    return decoded_bytes(count, resolution) > memory_budget_bytes(processes)


def _decode_cached(paths: list[Source], resolution: int, cache_dir: str | None, progress: bool) -> np.ndarray:
    key = digest_sources(hashlib.sha256(f"v1|{resolution}".encode()), paths)
    cache_file = cache_root(cache_dir) / f"imagefolder-{key.hexdigest()[:24]}.npz"
    cached = load_cached(cache_file, "images")
    if cached is not None:
        return cached["images"]
    images = np.empty((len(paths), resolution, resolution, 3), dtype=np.uint8)
    bar = tqdm(paths, desc=f"decoding {len(paths)} images", unit="img", disable=not progress, leave=False)
    for i, p in enumerate(bar):
        images[i] = decode_image(p, resolution)
    atomic_save_npz(cache_file, images=images)
    return images
