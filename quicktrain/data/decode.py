"""What an image folder may hold, and how one file becomes RGB pixels: the one place that opens
images, so every path (decode cache, stream, photo store, predict) answers an odd file alike.

* **Which files count**: torchvision's extensions (``IMG_EXTENSIONS``, any case), found in the
  class folder and every folder below it (``os.walk``, links followed, as torchvision's
  ImageFolder); names starting with ``.`` are skipped, files and folders alike (macOS
  ``._name.jpg`` AppleDouble files, ``.DS_Store``, ``.ipynb_checkpoints``, ``.git``).
* **Decoding**: any mode Pillow reads becomes 8-bit RGB; 16-bit greyscale (PNG, TIFF) is scaled
  to 8 bits (Pillow's ``convert`` clips it at 255, which turns most of a 16-bit image white).
* **Sources**: an image is a file (a ``Path``), its bytes, or a :class:`ByteRef` (an image inside a
  shard or an Arrow table, read when needed: a build or loader worker reads its own), so folders,
  WebDataset shards and Hugging Face datasets share one decoder, store and stream.
* **Faults**: a file Pillow cannot read, or one that declares more pixels than the limit
  (Pillow's decompression-bomb guard, 178,956,970 by default; ``data.max_image_pixels`` raises
  it for real gigapixel scans), is a :class:`DataError` naming the file.

Example:
    >>> decode_image(encode_png(np.zeros((5, 7), np.uint16) + 65535), 4).max()
    np.uint8(255)
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from quicktrain.errors import DataError

# torchvision.datasets.folder.IMG_EXTENSIONS (not imported: torchvision is heavy and this is a leaf)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
PIXEL_LIMIT_ENV = "QUICKTRAIN_MAX_IMAGE_PIXELS"  # read by worker processes, however they were started
DEFAULT_PIXEL_LIMIT = 2 * 89_478_485  # where Pillow raises DecompressionBombError by default
_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")


def pixel_limit() -> int:
    """The most pixels an image may declare: ``$QUICKTRAIN_MAX_IMAGE_PIXELS``, else Pillow's limit."""
    return int(os.environ.get(PIXEL_LIMIT_ENV) or DEFAULT_PIXEL_LIMIT)


def set_pixel_limit(limit: int) -> None:
    """Apply ``data.max_image_pixels`` here and in every process started after this call."""
    os.environ[PIXEL_LIMIT_ENV] = str(int(limit))


# Pillow warns above MAX_IMAGE_PIXELS and raises above twice it; one limit is stated, so :func:`opened`
# sets Pillow's error threshold to it each time (an environment look-up) and the warning is not shown
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)


@runtime_checkable
class ByteRef(Protocol):
    """An image kept inside something else (a tar shard, an Arrow table): picklable, read on demand."""

    name: str  # how errors name it: 'train-000.tar:000042.jpg'

    def read(self) -> bytes: ...

    def identity(self) -> str: ...  # changes when the image may have: for cache keys

    def nbytes(self) -> int: ...


Source = Path | bytes | ByteRef


def source_name(source: Source) -> str:
    return "<bytes>" if isinstance(source, bytes) else str(source) if isinstance(source, Path) else source.name


def source_identity(source: Source) -> str:
    """What a cache key holds for one image: a file's path, size and time; a reference's own."""
    if isinstance(source, Path):
        st = source.stat()
        return f"{source.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return source.identity()


def digest_sources(digest: Any, sources: Iterable[Source]) -> Any:
    """``digest`` (a hashlib object) updated with every image's identity, in order: the part of a
    cache key that changes when any image may have."""
    for source in sources:
        digest.update(f"|{source_identity(source)}".encode())
    return digest


def source_nbytes(source: Source) -> int:
    return source.stat().st_size if isinstance(source, Path) else source.nbytes()


def is_image_file(name: str) -> bool:
    """An image by its extension (any case), not hidden (``._x.jpg``, ``.DS_Store``)."""
    return not name.startswith(".") and name.lower().endswith(IMAGE_SUFFIXES)


def list_images(folder: Path) -> tuple[list[Path], int]:
    """The image files in ``folder`` and the folders below it, sorted, and how many of them lie
    in subfolders; hidden folders (``.ipynb_checkpoints``) are not entered."""
    found, nested = [], 0
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # os.walk descends into what is left
        here = [Path(root) / f for f in sorted(files) if is_image_file(f)]
        found += here
        nested += len(here) if Path(root) != folder else 0
    return found, nested


@contextlib.contextmanager
def opened(source: Source) -> Iterator[Image.Image]:
    """``Image.open`` whose every failure (unreadable, truncated, over the pixel limit) is a one-line
    :class:`DataError` naming the file; errors raised inside the block are translated alike."""
    name = source_name(source)
    Image.MAX_IMAGE_PIXELS = pixel_limit() // 2
    if not isinstance(source, (Path, bytes)):
        source = source.read()
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as img:
            yield img
    except Image.DecompressionBombError:
        raise DataError(
            f"image '{name}' declares more than {pixel_limit():,} pixels (a decompression bomb?); if it is a real "
            "image, raise the limit with --max-image-pixels N"
        ) from None
    except (OSError, ValueError, SyntaxError, EOFError) as err:
        raise DataError(f"cannot decode image '{name}': {' '.join(str(err).split())[:160]}") from None


def to_rgb(img: Image.Image) -> Image.Image:
    """8-bit RGB; 16-bit greyscale scaled to 8 bits rather than clipped."""
    if img.mode in _SIXTEEN_BIT:
        wide = np.clip(np.asarray(img, dtype=np.int64), 0, 65535)
        img = Image.fromarray((wide >> 8).astype(np.uint8))  # (H, W) uint8: mode L
    return img if img.mode == "RGB" else img.convert("RGB")


def decode_image(source: Source, resolution: int) -> np.ndarray:
    """One image file (or its bytes) as (resolution, resolution, 3) uint8 RGB."""
    with opened(source) as img:
        img = to_rgb(img)
        if img.size != (resolution, resolution):
            img = img.resize((resolution, resolution), Image.BILINEAR)
        return np.asarray(img, dtype=np.uint8)


def encode_png(pixels: np.ndarray) -> bytes:
    """PNG bytes of an (H, W) or (H, W, 3) array (uint8, or uint16 greyscale): for tests and docs."""
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()
