"""CIFAR augmentation on uint8 batches: random crop (zero padding, 4 pixels by default) and
horizontal flip, random or alternating.

The random parameters of a whole epoch are drawn up front from ``(seed, epoch)``, one row
per sample index. A sample's augmentation therefore depends only on the seed, the epoch
and its index: not on the batch it lands in, the accumulation split, or which worker
process decodes it. That is what lets runs that differ only in micro-batch size see
identical inputs.

Alternating flip (airbench's derandomised flip): each image gets one random flip bit from the
seed alone and is mirrored in every other epoch from then on, so over any two consecutive
epochs the network sees both orientations of every image exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np


@dataclass(frozen=True)
class AugmentSpec:
    """The training augmentation's settings (config ``data.crop_pad``, ``data.flip``)."""

    pad: int = 4  # crops shift the image by up to this many pixels
    flip: Literal["random", "alternate"] = "random"


PAD4_RANDOM_FLIP = AugmentSpec()  # the usual CIFAR augmentation, and the default


@dataclass(frozen=True)
class CropFlip:
    """Per-sample crop offsets into the padded image and flip flags for one epoch."""

    dy: np.ndarray  # (N,) int, 0..2*pad
    dx: np.ndarray  # (N,) int, 0..2*pad
    flip: np.ndarray  # (N,) bool

    @classmethod
    def draw(cls, n: int, seed: int, epoch: int, spec: AugmentSpec = PAD4_RANDOM_FLIP) -> CropFlip:
        rng = np.random.default_rng([seed, epoch, 0xA06])
        dy, dx = rng.integers(0, 2 * spec.pad + 1, n), rng.integers(0, 2 * spec.pad + 1, n)
        flip = rng.random(n) < 0.5
        if spec.flip == "alternate":
            flip = (np.random.default_rng([seed, 0xF11]).random(n) < 0.5) ^ bool(epoch % 2)
        return cls(dy=dy, dx=dx, flip=flip)

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
