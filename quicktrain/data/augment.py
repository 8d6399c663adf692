"""CIFAR augmentation on uint8 batches: random crop (zero or reflect padding, 4 pixels by default),
horizontal flip (random or alternating) and optional cutout.

The random parameters of a whole epoch are drawn up front from ``(seed, epoch)``, one row
per sample index. A sample's augmentation therefore depends only on the seed, the epoch
and its index: not on the batch it lands in, the accumulation split, or which worker
process decodes it. That is what lets runs that differ only in micro-batch size see
identical inputs.

Alternating flip (airbench's derandomised flip): each image gets one random flip bit from the
seed alone and is mirrored in every other epoch from then on, so over any two consecutive
epochs the network sees both orientations of every image exactly once.

Cutout (DeVries & Taylor): a ``cutout`` x ``cutout`` square at a random centre is set to 0
(black), clipped at the borders; applied after crop and flip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np


@dataclass(frozen=True)
class AugmentSpec:
    """The training augmentation's settings (config ``data.crop_pad``, ``data.flip``)."""

    pad: int = 4  # crops shift the image by up to this many pixels
    flip: Literal["random", "alternate"] = "random"
    cutout: int = 0  # side of the blanked square; 0: no cutout
    fill: Literal["zero", "reflect"] = "zero"  # what the padding holds: black, or the image mirrored at its edge

    def describe(self) -> str:
        cutout = f", cutout {self.cutout} px" if self.cutout else ""
        return f"random crop (padding {self.pad}, {self.fill}), {self.flip} flip{cutout}"


PAD_MODES = {"zero": "constant", "reflect": "reflect"}  # fill -> the pad mode, as numpy and torch both name it
PAD4_RANDOM_FLIP = AugmentSpec()  # the usual CIFAR augmentation, and the default


@dataclass(frozen=True)
class CropFlip:
    """Per-sample crop offsets into the padded image and flip flags for one epoch."""

    dy: np.ndarray  # (N,) int, 0..2*pad
    dx: np.ndarray  # (N,) int, 0..2*pad
    flip: np.ndarray  # (N,) bool
    centre: np.ndarray | None = None  # (N, 2) cutout centres as fractions of height and width

    @classmethod
    def draw(cls, n: int, seed: int, epoch: int, spec: AugmentSpec = PAD4_RANDOM_FLIP) -> CropFlip:
        rng = np.random.default_rng([seed, epoch, 0xA06])
        dy, dx = rng.integers(0, 2 * spec.pad + 1, n), rng.integers(0, 2 * spec.pad + 1, n)
        flip = rng.random(n) < 0.5
        if spec.flip == "alternate":
            flip = (np.random.default_rng([seed, 0xF11]).random(n) < 0.5) ^ bool(epoch % 2)
        centre = np.random.default_rng([seed, epoch, 0xC07]).random((n, 2)) if spec.cutout else None
        return cls(dy=dy, dx=dx, flip=flip, centre=centre)

    @classmethod
    def identity(cls, n: int, pad: int = 4) -> CropFlip:
        centre = np.full(n, pad)
        return cls(centre, centre, np.zeros(n, dtype=bool))


def crop_flip(
    images: np.ndarray, dy: np.ndarray, dx: np.ndarray, flip: np.ndarray, pad: int = 4, fill: str = "zero"
) -> np.ndarray:
    """Pad by ``pad`` (zeros, or the image reflected at its edge), crop back to the original size
    at (dy, dx), mirror where ``flip``.

    One fancy-indexing gather does crop and flip together for the whole batch.
    images: (B, H, W, C) uint8 -> (B, H, W, C) uint8
    """
    b, h, w, _ = images.shape
    padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode=PAD_MODES[fill])
    cols = np.where(flip[:, None], np.arange(w)[::-1], np.arange(w))  # (B, W)
    rows = dy[:, None] + np.arange(h)  # (B, H)
    cols = dx[:, None] + cols  # (B, W)
    return padded[np.arange(b)[:, None, None], rows[:, :, None], cols[:, None, :]]


def cutout_mask(centre: Any, size: int, h: int, w: int, arange: Callable[[int], Any]) -> Any:
    """(B, H, W) booleans, True inside each sample's ``size`` x ``size`` square around
    ``centre`` (B, 2) fractions. Written with operators only, so it serves numpy arrays
    (``arange=np.arange``) and device tensors (a ``torch.arange`` on that device) alike."""
    top, left = _floor(centre[:, 0] * h), _floor(centre[:, 1] * w)
    rows = arange(h)[None, :] - (top[:, None] - size // 2)
    cols = arange(w)[None, :] - (left[:, None] - size // 2)
    return ((rows >= 0) & (rows < size))[:, :, None] & ((cols >= 0) & (cols < size))[:, None, :]


def _floor(x: Any) -> Any:
    """Non-negative fractions times a size -> integer indices, for numpy arrays or tensors."""
    return x.astype(int) if isinstance(x, np.ndarray) else x.long()


def cutout(images: np.ndarray, centre: np.ndarray, size: int) -> np.ndarray:
    """images (B, H, W, C) uint8 with each sample's square set to 0."""
    _, h, w, _ = images.shape
    return np.where(cutout_mask(centre, size, h, w, np.arange)[..., None], np.uint8(0), images)
