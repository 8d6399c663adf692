"""CIFAR augmentation on uint8 batches: pad-4 random crop and horizontal flip.

The random parameters of a whole epoch are drawn up front from ``(seed, epoch)``, one row
per sample index. A sample's augmentation therefore depends only on the seed, the epoch
and its index: not on the batch it lands in, the accumulation split, or which worker
process decodes it. That is what lets runs that differ only in micro-batch size see
identical inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CropFlip:
    """Per-sample crop offsets into the padded image and flip flags for one epoch."""

    dy: np.ndarray  # (N,) int, 0..2*pad
    dx: np.ndarray  # (N,) int, 0..2*pad
    flip: np.ndarray  # (N,) bool

    @classmethod
    def draw(cls, n: int, seed: int, epoch: int, pad: int = 4) -> CropFlip:
        rng = np.random.default_rng([seed, epoch, 0xA06])
        return cls(
            dy=rng.integers(0, 2 * pad + 1, n),
            dx=rng.integers(0, 2 * pad + 1, n),
            flip=rng.random(n) < 0.5,
        )

    @classmethod
    def identity(cls, n: int, pad: int = 4) -> CropFlip:
        centre = np.full(n, pad)
        return cls(centre, centre, np.zeros(n, dtype=bool))


def crop_flip(images: np.ndarray, dy: np.ndarray, dx: np.ndarray, flip: np.ndarray, pad: int = 4) -> np.ndarray:
    """Zero-pad by ``pad``, crop back to the original size at (dy, dx), mirror where ``flip``.

    One fancy-indexing gather does crop and flip together for the whole batch.
    images: (B, H, W, C) uint8 -> (B, H, W, C) uint8
    """
    b, h, w, _ = images.shape
    padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    cols = np.where(flip[:, None], np.arange(w)[::-1], np.arange(w))  # (B, W)
    rows = dy[:, None] + np.arange(h)  # (B, H)
    cols = dx[:, None] + cols  # (B, W)
    return padded[np.arange(b)[:, None, None], rows[:, :, None], cols[:, None, :]]
