"""Per-channel normalisation statistics of a training split, computed once and cached.

Exact, from per-channel histograms of the uint8 pixels (no float copy of the data set), as
fractions of 255. The cache key is the split's shape and a strided sample of its bytes, so a
different subset, validation carve-out or folder gets its own entry.

Example:
    >>> import numpy as np
    >>> images = np.zeros((2, 4, 4, 3), dtype=np.uint8); images[1] = 255
    >>> channel_stats(images)
    ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
"""

from __future__ import annotations

import hashlib
import json
import logging

import numpy as np

from quicktrain.atomic import atomic_write_text
from quicktrain.data.cache import cache_root

log = logging.getLogger("quicktrain")

Stats = tuple[tuple[float, ...], tuple[float, ...]]


def channel_stats(images: np.ndarray, chunk: int = 4096) -> Stats:
    """(mean, std) per channel of uint8 (N, H, W, C) images, in [0, 1] units."""
    channels = images.shape[-1]
    offsets = (np.arange(channels) * 256).astype(np.uint16)
    counts = np.zeros(256 * channels, dtype=np.int64)
    for start in range(0, len(images), chunk):  # one histogram of all channels per chunk
        block = images[start : start + chunk].reshape(-1, channels)
        counts += np.bincount((block + offsets).ravel(), minlength=256 * channels)
    hist = counts.reshape(channels, 256).astype(np.float64)
    values = np.arange(256, dtype=np.float64) / 255.0
    n = hist.sum(axis=1)
    mean = (hist @ values) / n
    var = np.maximum((hist @ values**2) / n - mean**2, 0.0)
    std = np.sqrt(var)
    std = np.where(std > 1e-6, std, 1.0)  # a constant channel: centre it, do not divide by zero
    return tuple(round(float(m), 6) for m in mean), tuple(round(float(s), 6) for s in std)


def cached_channel_stats(images: np.ndarray, source: str, cache_dir: str | None = None) -> Stats:
    """:func:`channel_stats`, remembered in the decode cache under a key of the split."""
    key = hashlib.sha256(f"v1|{source}|{images.shape}".encode())
    if isinstance(images, np.ndarray):
        key.update(np.ascontiguousarray(images.reshape(len(images), -1)[:: max(1, len(images) // 512)]).tobytes())
    else:  # streamed from files: their names, sizes and times
        key.update(images.fingerprint().encode())
    path = cache_root(cache_dir) / f"stats-{key.hexdigest()[:24]}.json"
    if path.is_file():
        try:
            saved = json.loads(path.read_text())
            return tuple(saved["mean"]), tuple(saved["std"])
        except (ValueError, KeyError):
            log.warning(f"normalisation cache '{path}' is damaged; recomputing it")
    if not isinstance(images, np.ndarray):
        kind = "streamed" if getattr(images, "streamed", True) else "stored"
        log.info(f"normalisation: one pass over {len(images)} {kind} training images (cached for later runs)")
    mean, std = channel_stats(images, chunk=4096 if isinstance(images, np.ndarray) else 256)
    atomic_write_text(path, json.dumps({"mean": mean, "std": std}) + "\n")
    return mean, std
