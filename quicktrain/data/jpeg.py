"""JPEG bytes to pixels and back, for the jpeg photo store: the fastest decoder installed.

Three decoders read a JPEG into ``(H, W, 3)`` uint8 RGB: Pillow (always there), simplejpeg
(``pip install 'quicktrain[jpeg]'``: libjpeg-turbo without Pillow's image objects) and TorchCodec's
``decode_jpeg`` (torchvision's ``decode_jpeg`` is deprecated in its favour). ``auto`` takes them in
the order measured on this project's CPUs (``benchmarks/jpeg_decoders.py``; the table is in
RESULTS), the first one installed; ``$QUICKTRAIN_JPEG_DECODER`` names one instead (the benchmark
uses it). Every decoder gives the same pixels to within libjpeg's rounding (tested).

Encoding (building a store) uses simplejpeg when installed, else Pillow, at quality 90 with 4:2:0
chroma subsampling, as FFCV stores JPEGs.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable

import numpy as np
from PIL import Image

from quicktrain.errors import ConfigError

DECODERS = ("simplejpeg", "torchcodec", "pillow")  # auto: the first installed, fastest first (measured)
QUALITY = 90


def _pillow(buf: bytes | memoryview) -> np.ndarray:
    with Image.open(io.BytesIO(buf)) as img:
        return np.asarray(img.convert("RGB"))


def _simplejpeg(buf: bytes | memoryview) -> np.ndarray:
    import simplejpeg

    return simplejpeg.decode_jpeg(buf, colorspace="RGB")


def _torchcodec(buf: bytes | memoryview) -> np.ndarray:
    import torch
    from torchcodec.decoders import decode_jpeg

    data = torch.frombuffer(bytearray(buf), dtype=torch.uint8)
    return decode_jpeg(data, mode="RGB").permute(1, 2, 0).numpy()


_FUNCTIONS: dict[str, Callable[[bytes | memoryview], np.ndarray]] = {
    "pillow": _pillow,
    "simplejpeg": _simplejpeg,
    "torchcodec": _torchcodec,
}
_MODULES = {"simplejpeg": "simplejpeg", "torchcodec": "torchcodec.decoders", "pillow": "PIL"}


@functools.cache
def installed(name: str) -> bool:
    try:
        __import__(_MODULES[name])
    except Exception:  # ImportError, or a library that cannot load its native parts (TorchCodec's FFmpeg)
        return False
    return True


def decoder_name(asked: str | None = None) -> str:
    """The decoder to use: ``asked`` or ``$QUICKTRAIN_JPEG_DECODER`` if set, else the fastest installed."""
    asked = asked or os.environ.get("QUICKTRAIN_JPEG_DECODER") or "auto"
    if asked == "auto":
        return next(name for name in DECODERS if installed(name))
    if asked not in _FUNCTIONS:
        raise ConfigError(f"JPEG decoder '{asked}' is not one of auto, {', '.join(DECODERS)}")
    if not installed(asked):
        raise ConfigError(f"JPEG decoder '{asked}' is not installed (pip install {asked})")
    return asked


def decoder(asked: str | None = None) -> Callable[[bytes | memoryview], np.ndarray]:
    """``bytes -> (H, W, 3) uint8`` with the decoder :func:`decoder_name` picks."""
    return _FUNCTIONS[decoder_name(asked)]


def encode(pixels: np.ndarray, quality: int = QUALITY) -> bytes:
    """``(H, W, 3)`` uint8 RGB as JPEG bytes (4:2:0, as FFCV keeps them)."""
    pixels = np.ascontiguousarray(pixels)
    if installed("simplejpeg"):
        import simplejpeg

        return simplejpeg.encode_jpeg(pixels, quality=quality, colorspace="RGB", colorsubsampling="420")
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=quality, subsampling=2)
    return out.getvalue()
