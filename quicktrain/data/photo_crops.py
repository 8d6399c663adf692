"""Photo crops: RandomResizedCrop for training, resize-and-centre-crop for evaluation.

Training (timm's and torchvision's RandomResizedCrop): a box of ``scale`` (0.08..1 by default) of
the image's area and aspect ratio in ``ratio`` (3/4..4/3, drawn log-uniformly), at a uniform
position, tried up to 10 times; if no try fits, the largest centred box within the ratio range.
The box is resized to ``size`` x ``size`` (bilinear, antialiased) and mirrored with the epoch's
flip (:class:`~quicktrain.data.augment.CropFlip`).

The random numbers of a sample depend only on ``(seed, epoch, sample index)``: they come from a
counter-based hash (SplitMix64) of those three, computed for the batch at hand. So no per-epoch
table of the whole split is needed (a streamed folder of a million photos works the same), a
sample's crop does not depend on its batch, worker or accumulation split, and ablation arms and
resumed runs see the same images, as with the CIFAR crops.

Evaluation (timm's eval transform): resize the shorter side to ``size / crop_pct`` then take the
centre ``size`` x ``size``; done here as the equivalent centred box of the source image, resized once.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

ATTEMPTS = 10  # as torchvision's RandomResizedCrop.get_params
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_BOX_STREAM = 0xB0C5


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def uniforms(seed: int, epoch: int, index: np.ndarray, count: int, stream: int = _BOX_STREAM) -> np.ndarray:
    """(B, count) floats in [0, 1), a pure function of (seed, epoch, stream, sample index, column).

    >>> a = uniforms(0, 1, np.array([5, 7]), 3); b = uniforms(0, 1, np.array([7]), 3)
    >>> bool((a[1] == b[0]).all()), a.shape
    (True, (2, 3))
    """
    key = np.uint64(0)
    for part in (seed, epoch, stream):
        key = _splitmix64(key ^ np.uint64(part & 0xFFFFFFFFFFFFFFFF))
    counter = np.asarray(index, dtype=np.uint64)[:, None] * np.uint64(count) + np.arange(count, dtype=np.uint64)
    bits = _splitmix64(counter ^ key)
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def resized_crop_boxes(
    sizes: np.ndarray, u: np.ndarray, scale: tuple[float, float], ratio: tuple[float, float]
) -> np.ndarray:
    """Boxes (B, 4) as (top, left, height, width) for images of ``sizes`` (B, 2) = (height, width),
    from ``u`` (B, 2 * ATTEMPTS + 2) uniforms: torchvision's RandomResizedCrop.get_params, vectorised."""
    h_img, w_img = sizes[:, 0:1].astype(np.float64), sizes[:, 1:2].astype(np.float64)
    area = h_img * w_img
    tries = u[:, : 2 * ATTEMPTS].reshape(len(u), ATTEMPTS, 2)
    target = area * (scale[0] + (scale[1] - scale[0]) * tries[..., 0])
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = np.exp(log_lo + (log_hi - log_lo) * tries[..., 1])
    w = np.rint(np.sqrt(target * aspect))
    h = np.rint(np.sqrt(target / aspect))
    fits = (w > 0) & (h > 0) & (w <= w_img) & (h <= h_img)
    first = np.argmax(fits, axis=1)  # the first try that fits
    any_fit = fits[np.arange(len(u)), first]
    h = h[np.arange(len(u)), first]
    w = w[np.arange(len(u)), first]
    # fallback: the whole image cropped to the nearest allowed aspect ratio, centred
    h_img, w_img = h_img[:, 0], w_img[:, 0]
    in_ratio = w_img / h_img
    fb_w = np.where(in_ratio < ratio[0], w_img, np.where(in_ratio > ratio[1], np.rint(h_img * ratio[1]), w_img))
    fb_h = np.where(in_ratio < ratio[0], np.rint(w_img / ratio[0]), h_img)
    h, w = np.where(any_fit, h, fb_h), np.where(any_fit, w, fb_w)
    pos_y, pos_x = u[:, 2 * ATTEMPTS], u[:, 2 * ATTEMPTS + 1]
    top = np.where(any_fit, np.floor(pos_y * (h_img - h + 1)), (h_img - h) // 2)
    left = np.where(any_fit, np.floor(pos_x * (w_img - w + 1)), (w_img - w) // 2)
    return np.stack([top, left, h, w], axis=1).astype(np.int64)


def centre_crop_boxes(sizes: np.ndarray, size: int, crop_pct: float) -> np.ndarray:
    """The evaluation crop as boxes (B, 4) of the source: the centred square that resizing the
    shorter side to ``size / crop_pct`` and cropping ``size`` x ``size`` would keep."""
    short = sizes.min(axis=1).astype(np.float64)
    side = np.minimum(np.rint(short * size / math.floor(size / crop_pct)), short).astype(np.int64)
    side = np.maximum(side, 1)
    top = (sizes[:, 0] - side) // 2
    left = (sizes[:, 1] - side) // 2
    return np.stack([top, left, side, side], axis=1)


def crop_resize(image: np.ndarray, box: np.ndarray, size: int, flip: bool = False) -> np.ndarray:
    """image (H, W, 3) uint8 -> its ``box`` (top, left, height, width) resized to (3, size, size),
    channels first, bilinear with antialiasing (torch's uint8 kernel: no float copy), mirrored when
    ``flip``. Channels first because that is what the kernel writes and what batches carry."""
    top, left, h, w = (int(v) for v in box)
    region = torch.from_numpy(np.array(image[top : top + h, left : left + w]))  # a copy: the store is read-only
    x = region.permute(2, 0, 1)[None]
    if (h, w) != (size, size):
        x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    out = x[0].flip(-1) if flip else x[0]
    return out.contiguous().numpy()
