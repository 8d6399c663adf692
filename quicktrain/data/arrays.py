"""The in-memory form every dataset is decoded into once: uint8 images and int64 labels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Split:
    images: np.ndarray  # (N, H, W, 3) uint8, HWC as decoders produce it (or a lazy stand-in: FileImages,
    # PhotoStore, PhotoFiles, which decode or crop the images asked for when indexed)
    labels: np.ndarray  # (N,) int64

    def __post_init__(self) -> None:
        assert self.images.dtype == np.uint8 and self.images.ndim == 4, self.images.shape
        assert len(self.images) == len(self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def lazy(self) -> bool:
        """Produced per batch (decoded from files, or cropped from a photo store), not one array."""
        return not isinstance(self.images, np.ndarray)

    @property
    def streamed(self) -> bool:
        """Decoded per batch from files (:mod:`quicktrain.data.stream`), not held in memory."""
        return getattr(self.images, "streamed", self.lazy)

    def take(self, indices: np.ndarray) -> Split:
        images = self.images.take(indices) if self.lazy else self.images[indices]
        return Split(images, self.labels[indices])


@dataclass(frozen=True)
class Arrays:
    """A dataset with a training split and a held-out test split."""

    name: str
    classes: tuple[str, ...]
    train: Split
    test: Split | None  # None when not loaded (tuning never reads it)
    source: str  # where it came from, for the run record
    val: Split | None = None  # carved out of the training split by --val-fraction
    crop: str = "pad"  # training crops: pad (CIFAR's pad-and-crop) or resized (photos: RandomResizedCrop)
    source_sizes: dict | None = None  # imagefolder: the files' sizes (see imagefolder.size_summary)
    notes: tuple[str, ...] = ()  # what loading found that the banner and record should say

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def image_size(self) -> int:
        return int(self.train.images.shape[1])


def carve_validation(train: Split, fraction: float, seed: int) -> tuple[Split, Split]:
    """Split ``train`` into (rest, validation): ``fraction`` of every class, chosen by ``seed``.

    >>> split = Split(np.zeros((10, 2, 2, 3), np.uint8), np.array([0] * 5 + [1] * 5))
    >>> rest, val = carve_validation(split, 0.4, seed=0)
    >>> len(rest), np.bincount(val.labels).tolist()
    (6, [2, 2])
    """
    rng = np.random.default_rng([seed, 0x7A1])
    chosen = []
    for c in np.unique(train.labels):
        members = np.flatnonzero(train.labels == c)
        n = min(max(1, round(fraction * len(members))), len(members) - 1)
        chosen.append(rng.permutation(members)[:n])
    val = np.sort(np.concatenate(chosen))
    rest = np.setdiff1d(np.arange(len(train)), val)
    return train.take(rest), train.take(val)


def balanced_subset(labels: np.ndarray, n: int | None, seed: int = 0) -> np.ndarray:
    """Indices of a fixed, class-balanced subset of ``n`` samples (all when ``n`` is None).

    Classes take turns, each in a seeded random order, so the first ``n`` indices hold
    ``n // num_classes`` (or one more) per class. The seed is fixed, not the training seed,
    so "the first 5,000 images" means the same images in every run.

    >>> labels = np.array([0, 0, 0, 1, 1, 1])
    >>> np.bincount(labels[balanced_subset(labels, 4)]).tolist()
    [2, 2]
    """
    if n is None or n >= len(labels):
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    # rank of each sample within its class, in the permuted order
    rank = np.empty(len(labels), dtype=np.int64)
    for c in np.unique(labels):
        members = order[labels[order] == c]
        rank[members] = np.arange(len(members))
    chosen = np.lexsort((labels, rank))[:n]  # by rank, then class: classes take turns
    return np.sort(chosen)
