"""Photos kept for training at 128-224 px: decoded once, downscaled, memory-mapped.

A folder of photos is decoded once into a store (FFCV's idea): every image with its shorter side
reduced to ``side`` (the aspect ratio kept; smaller images kept as they are) in one file, plus an
index of offsets, stored sizes and source sizes. The file is opened with ``np.memmap``, so the
torchrun processes of one machine share one copy through the page cache instead of each holding
its own. Two formats (``data.store_format``):

* ``raw``: uint8 RGB pixels; an epoch reads pixels and decodes nothing, but at 224 px (side 256)
  an image takes ~200 KB, often 2-5x its source JPEG;
* ``jpeg``: each stored image re-encoded at quality 90 (as FFCV keeps them), decoded in the loader
  workers with the fastest decoder installed (:mod:`quicktrain.data.jpeg`): no bigger than the
  source folder, at the cost of a decode of a small JPEG per image and epoch.

Decoding uses libjpeg's reduced-size path (Pillow's ``draft``: a 512 px JPEG stored at 256 px is
decoded at 1/2 scale, never at full size) and runs in ``workers`` processes. The store is keyed
like the other caches (the files' names, sizes and modification times, and ``side``), built under
a file lock (ranks that start together build it once), in a temporary folder renamed into place
(a crash leaves no half store), and rebuilt with a warning when damaged.

Streamed folders (``data.data_mode=stream``) use the same decoder per batch in the loader's
workers (:class:`PhotoFiles`), so a seed gives the same batches with and without the store.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import math
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm import tqdm

from quicktrain.data import jpeg
from quicktrain.data.cache import cache_root
from quicktrain.data.decode import Source, digest_sources, opened, to_rgb
from quicktrain.data.photo_crops import ATTEMPTS, centre_crop_boxes, crop_resize, resized_crop_boxes, uniforms
from quicktrain.errors import DataError

log = logging.getLogger("quicktrain")
VERSION = "photos-v1"
_CHUNK = 64  # files per task of a parallel build
FORMATS = ("raw", "jpeg")
DATA_FILE = {"raw": "pixels.u8", "jpeg": "jpegs.bin"}  # the store's one data file, per format


def decode_photo(path: Source, side: int) -> tuple[np.ndarray, tuple[int, int]]:
    """One image file as (H, W, 3) uint8 with its shorter side at most ``side`` (aspect kept), and
    its source (height, width). JPEGs are decoded at the smallest DCT scale still >= that size."""
    with opened(path) as img:
        width, height = img.size
        short = min(width, height)
        target = (math.ceil(width * side / short), math.ceil(height * side / short))
        if short > side and hasattr(img, "draft"):
            img.draft("RGB", target)  # JPEG only: a 1/2, 1/4 or 1/8 scale decode; others ignore it
        img = to_rgb(img)
        if min(img.size) > side:
            img = img.resize(target, Image.BILINEAR)  # antialiased: Pillow's filters widen when reducing
        return np.asarray(img, dtype=np.uint8), (height, width)


def eval_crop(path: Source, side: int, size: int, crop_pct: float, fmt: str = "raw") -> np.ndarray:
    """One file as a photo run evaluates it, (size, size, 3): decoded as the store does (for a jpeg
    store, re-encoded and decoded again, so predict sees what evaluation saw), centre crop."""
    image = decode_photo(path, side)[0]
    if fmt == "jpeg":
        image = jpeg.decoder()(jpeg.encode(image))
    box = centre_crop_boxes(_sizes([image]), size, crop_pct)[0]
    return crop_resize(image, box, size).transpose(1, 2, 0)


def _sizes(images: list[np.ndarray]) -> np.ndarray:
    return np.array([image.shape[:2] for image in images], dtype=np.int64).reshape(-1, 2)


def _store_chunk(job: tuple[list[Source], int, str]) -> list[tuple[bytes, tuple[int, int], tuple[int, int]]]:
    """Decode (and for ``jpeg`` re-encode) one chunk of images: (stored bytes, stored and source size)."""
    sources, side, fmt = job
    out = []
    for p in sources:
        pixels, source = decode_photo(p, side)
        data = jpeg.encode(pixels) if fmt == "jpeg" else pixels.tobytes()
        out.append((data, pixels.shape[:2], source))
    return out


class PhotoImages:
    """``N`` photos as a lazy ``(N, size, size, 3)`` uint8 array: indexing gives the evaluation
    crops (:func:`centre_crop_boxes`); :meth:`train_crops` the training crops of an epoch."""

    dtype = np.dtype(np.uint8)
    ndim = 4
    streamed = False

    def __init__(self, size: int, crop_pct: float, rows: np.ndarray) -> None:
        self.size, self.crop_pct, self.rows = size, crop_pct, rows

    def image(self, row: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (len(self.rows), self.size, self.size, 3)

    def __len__(self) -> int:
        return len(self.rows)

    def _chosen(self, index: slice | np.ndarray | list[int]) -> np.ndarray:
        return self.rows[index] if isinstance(index, slice) else self.rows[np.asarray(index, dtype=np.int64)]

    def __getitem__(self, index: slice | np.ndarray | list[int]) -> np.ndarray:
        images = [self.image(int(row)) for row in self._chosen(index)]
        boxes = centre_crop_boxes(_sizes(images), self.size, self.crop_pct)
        return self._crops(images, boxes, np.zeros(len(images), dtype=bool))

    def train_crops(
        self,
        index: np.ndarray,
        seed: int,
        epoch: int,
        flip: np.ndarray,
        scale: tuple[float, float],
        ratio: tuple[float, float],
    ) -> np.ndarray:
        """RandomResizedCrop + flip of the samples ``index`` (positions in this split) for one epoch."""
        images = [self.image(int(row)) for row in self.rows[np.asarray(index, dtype=np.int64)]]
        u = uniforms(seed, epoch, index, 2 * ATTEMPTS + 2)
        return self._crops(images, resized_crop_boxes(_sizes(images), u, scale, ratio), flip)

    def _crops(self, images: list[np.ndarray], boxes: np.ndarray, flip: np.ndarray) -> np.ndarray:
        """(B, size, size, 3) uint8: a view of channels-first memory, so the loader's (B, 3, H, W)
        batch is this memory as it is, without a transposing copy."""
        out = np.empty((len(images), 3, self.size, self.size), dtype=np.uint8)
        for i, (image, box) in enumerate(zip(images, boxes)):
            out[i] = crop_resize(image, box, self.size, bool(flip[i]))
        return out.transpose(0, 2, 3, 1)

    def take(self, indices: np.ndarray) -> PhotoImages:
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.rows = self.rows[np.asarray(indices, dtype=np.int64)]
        return clone


class PhotoStore(PhotoImages):
    """A built store (see the module doc), memory-mapped when first read in each process."""

    def __init__(self, folder: Path, side: int, size: int, crop_pct: float) -> None:
        with np.load(folder / "index.npz") as index:
            self.offsets, self.stored, self.source = index["offsets"], index["stored"], index["source"]
        super().__init__(size, crop_pct, np.arange(len(self.stored)))
        self.folder, self.side = folder, side
        self.format = store_format(folder)
        self._pixels: np.memmap | None = None
        self._decode = None  # jpeg: the decoder, chosen in the process that reads

    def image(self, row: int) -> np.ndarray:
        if self._pixels is None:
            self._pixels = np.memmap(self.folder / DATA_FILE[self.format], dtype=np.uint8, mode="r")
        data = self._pixels[self.offsets[row] : self.offsets[row + 1]]
        if self.format == "raw":
            h, w = self.stored[row]
            return data.reshape(h, w, 3)
        if self._decode is None:
            self._decode = jpeg.decoder()
        return self._decode(data)

    def nbytes(self) -> int:
        return int(self.offsets[-1])

    def source_sizes(self) -> np.ndarray:
        return self.source[self.rows]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_pixels": None, "_decode": None}  # a worker maps the file itself

    def fingerprint(self) -> str:
        return hashlib.sha256(
            f"{self.folder.name}|{self.size}|{self.crop_pct}|".encode() + self.rows.tobytes()
        ).hexdigest()


class PhotoFiles(PhotoImages):
    """Photos decoded per batch from their files (streaming), with the store's decoder."""

    streamed = True

    def __init__(self, paths: list[Source], side: int, size: int, crop_pct: float) -> None:
        super().__init__(size, crop_pct, np.arange(len(paths)))
        self.paths, self.side = list(paths), side

    def image(self, row: int) -> np.ndarray:
        return decode_photo(self.paths[row], self.side)[0]

    def fingerprint(self) -> str:
        digest = hashlib.sha256(f"{self.side}|{self.size}|{self.crop_pct}".encode())
        return digest_sources(digest, (self.paths[row] for row in self.rows)).hexdigest()


def store_format(folder: Path) -> str:
    return next((fmt for fmt in FORMATS if (folder / DATA_FILE[fmt]).is_file()), "raw")


def store_key(paths: list[Source], side: int, fmt: str = "raw") -> str:
    key = hashlib.sha256(f"{VERSION}|{side}".encode() + (b"" if fmt == "raw" else f"|{fmt}|q{jpeg.QUALITY}".encode()))
    return digest_sources(key, paths).hexdigest()[:24]


def open_store(
    paths: list[Source],
    side: int,
    size: int,
    crop_pct: float,
    cache_dir: str | None = None,
    workers: int | None = None,
    progress: bool = True,
    expected_bytes: int = 0,
    fmt: str = "raw",
) -> PhotoStore:
    """The store of ``paths`` at ``side`` in format ``fmt``, built first if there is none (or a
    damaged one); ``expected_bytes`` (an estimate of its size) is checked against the free disk first."""
    root = cache_root(cache_dir)
    folder = root / f"photos-{store_key(paths, side, fmt)}"
    with _locked(root / f".{folder.name}.lock"):
        if not _valid(folder):
            free = shutil.disk_usage(root).free
            if expected_bytes > free:
                raise DataError(
                    f"the photo store needs about {expected_bytes / 2**30:.1f} GiB, {root} has {free / 2**30:.1f} "
                    "GiB free; set --cache-dir (or $QUICKTRAIN_CACHE) elsewhere, a smaller --store-size, or "
                    "--store-format jpeg, or --data-mode stream"
                )
            _build(paths, side, folder, workers, progress, fmt)
    return PhotoStore(folder, side, size, crop_pct)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # another rank building the same store: wait for it
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _valid(folder: Path) -> bool:
    if not folder.exists():
        return False
    try:
        with np.load(folder / "index.npz") as index:
            offsets, stored = index["offsets"], index["stored"]
        data = folder / DATA_FILE[store_format(folder)]
        if data.stat().st_size == int(offsets[-1]) and len(offsets) == len(stored) + 1:
            return True
        problem = "its data file has the wrong size"
    except (OSError, ValueError, KeyError, EOFError) as err:
        problem = f"{type(err).__name__}: {err}"
    log.warning(f"photo store '{folder}' is damaged ({problem}); rebuilding it")
    shutil.rmtree(folder, ignore_errors=True)
    return False


def _build(paths: list[Source], side: int, folder: Path, workers: int | None, progress: bool, fmt: str) -> None:
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    offsets, stored, source = [0], [], []
    chunks = [(paths[i : i + _CHUNK], side, fmt) for i in range(0, len(paths), _CHUNK)]
    workers = workers or os.cpu_count() or 1
    bar = tqdm(total=len(paths), desc=f"photo store ({fmt}, {side} px)", unit="img", disable=not progress, leave=False)
    try:
        with open(tmp / DATA_FILE[fmt], "wb") as out, _pool(workers, len(chunks)) as pool:
            for decoded in pool(_store_chunk, chunks):
                for data, hw, src in decoded:
                    out.write(data)
                    offsets.append(offsets[-1] + len(data))
                    stored.append(hw)
                    source.append(src)
                bar.update(len(decoded))
        with open(tmp / "index.npz", "wb") as f:
            np.savez(f, offsets=np.asarray(offsets, np.int64), stored=np.asarray(stored, np.int64),
                     source=np.asarray(source, np.int64))  # fmt: skip
        os.rename(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        bar.close()


@contextlib.contextmanager
def _pool(workers: int, tasks: int) -> Iterator:
    if workers <= 1 or tasks <= 1:
        yield map
        return
    with ProcessPoolExecutor(min(workers, tasks)) as executor:
        yield executor.map
