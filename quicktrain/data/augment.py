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

Colour jitter (after the 2 s A100 CIFAR-10 record of hiverge/cifar10-speedrun): each image's
normalised values ``x = (p - mean) / std`` become ``(x + b) * c``, ``b`` up to +-``brightness``,
``c`` in 1 +- ``contrast``, one pair per image and epoch. Applied to the uint8 pixels as
``mean + (p - mean + b * std) * c``, rounded and clipped to 0..255, so the batches stay uint8 and
both loaders yield the same bytes; applied last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np


@dataclass(frozen=True)
class AugmentSpec:
    """The training augmentation's settings (config ``data.crop_pad``, ``data.flip``, ...)."""

    crop: Literal["pad", "resized"] = "pad"  # pad-and-crop, or RandomResizedCrop (photos: photo_crops)
    scale: tuple[float, float] = (0.08, 1.0)  # RandomResizedCrop's share of the area
    ratio: tuple[float, float] = (3 / 4, 4 / 3)  # and its aspect ratio range
    pad: int = 4  # crops shift the image by up to this many pixels
    flip: Literal["random", "alternate"] = "random"
    cutout: int = 0  # side of the blanked square; 0: no cutout
    fill: Literal["zero", "reflect"] = "zero"  # what the padding holds: black, or the image mirrored at its edge
    brightness: float = 0.0  # colour jitter: shift of up to this many normalised units; 0: none
    contrast: float = 0.0  # colour jitter: scale of 1 +- up to this; 0: none
    mean: tuple[float, ...] = (0.5, 0.5, 0.5)  # the normalisation the jitter works in, fractions of 255
    std: tuple[float, ...] = (0.25, 0.25, 0.25)

    @property
    def jitter(self) -> bool:
        return self.brightness > 0 or self.contrast > 0

    def pixel_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """The jitter's mean and std per channel in 0..255 units, float32 (C,)."""
        return tuple(np.asarray([255.0 * v for v in stat], dtype=np.float32) for stat in (self.mean, self.std))

    def describe(self) -> str:
        cutout = f", cutout {self.cutout} px" if self.cutout else ""
        jitter = f", colour jitter (brightness {self.brightness:g}, contrast {self.contrast:g})" if self.jitter else ""
        if self.crop == "resized":
            (a, b), (r, q) = self.scale, self.ratio
            crop = f"random resized crop (area {a:g}-{b:g}, ratio {r:.3g}-{q:.3g})"
        else:
            crop = f"random crop (padding {self.pad}, {self.fill})"
        return f"{crop}, {self.flip} flip{cutout}{jitter}"


PAD_MODES = {"zero": "constant", "reflect": "reflect"}  # fill -> the pad mode, as numpy and torch both name it
PAD4_RANDOM_FLIP = AugmentSpec()  # the usual CIFAR augmentation, and the default


@dataclass(frozen=True)
class CropFlip:
    """Per-sample crop offsets into the padded image and flip flags for one epoch."""

    dy: np.ndarray  # (N,) int, 0..2*pad
    dx: np.ndarray  # (N,) int, 0..2*pad
    flip: np.ndarray  # (N,) bool
    centre: np.ndarray | None = None  # (N, 2) cutout centres as fractions of height and width
    shift: np.ndarray | None = None  # (N,) float32 colour jitter: brightness shifts, normalised units
    scale: np.ndarray | None = None  # (N,) float32 colour jitter: contrast factors

    @classmethod
    def draw(cls, n: int, seed: int, epoch: int, spec: AugmentSpec = PAD4_RANDOM_FLIP) -> CropFlip:
        rng = np.random.default_rng([seed, epoch, 0xA06])
        dy, dx = rng.integers(0, 2 * spec.pad + 1, n), rng.integers(0, 2 * spec.pad + 1, n)
        flip = rng.random(n) < 0.5
        if spec.flip == "alternate":
            flip = (np.random.default_rng([seed, 0xF11]).random(n) < 0.5) ^ bool(epoch % 2)
        centre = np.random.default_rng([seed, epoch, 0xC07]).random((n, 2)) if spec.cutout else None
        shift = scale = None
        if spec.jitter:
            uniform = np.random.default_rng([seed, epoch, 0xC01]).random((2, n)) * 2 - 1  # in [-1, 1)
            shift = (uniform[0] * spec.brightness).astype(np.float32)
            scale = (1 + uniform[1] * spec.contrast).astype(np.float32)
        return cls(dy=dy, dx=dx, flip=flip, centre=centre, shift=shift, scale=scale)

    def arrays(self) -> dict[str, np.ndarray]:
        """The parameters this epoch draws, by name (the optional ones only when drawn)."""
        names = ("dy", "dx", "flip", "centre", "shift", "scale")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

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


def jitter_affine(shift: Any, scale: Any, mean: Any, std: Any) -> tuple[Any, Any]:
    """``(a, d)`` with ``jittered pixel = a * p + d`` in 0..255 units, the module doc's
    ``mean + (p - mean + b * std) * c`` for ``b = shift``, ``c = scale`` ((B,) arrays or tensors)
    and the per-channel ``mean``, ``std`` of :meth:`AugmentSpec.pixel_stats` (as the same kind of
    array): ``a`` (B, 1), ``d`` (B, C). Operators only, so numpy and device tensors alike."""
    return scale[:, None], mean + (shift[:, None] * std - mean) * scale[:, None]


def color_jitter(images: np.ndarray, shift: np.ndarray, scale: np.ndarray, spec: AugmentSpec) -> np.ndarray:
    """images (B, H, W, C) uint8 with each sample's brightness and contrast jittered (module doc)."""
    a, d = jitter_affine(shift, scale, *spec.pixel_stats())
    jittered = images.astype(np.float32) * a[:, None, None, :] + d[:, None, None, :]
    return np.clip(np.rint(jittered), 0, 255).astype(np.uint8)
