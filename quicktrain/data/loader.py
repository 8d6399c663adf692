"""DataLoaders over decoded arrays, with epoch-seeded order and augmentation.

Batches leave the loader as uint8 (B, 3, H, W) tensors: four times fewer bytes to pin and
copy than float32. Conversion, normalisation and resizing happen on the device
(:mod:`quicktrain.data.prepare`).

The training loader yields *effective* batches (``run.batch_size`` samples, one optimizer
update); the training step splits each into micro-batches. So the accumulation split never
changes which samples are seen, in which order, with which augmentation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from quicktrain.data.arrays import Split
from quicktrain.data.augment import CropFlip, crop_flip


def epoch_seed(seed: int, epoch: int, stream: int) -> int:
    """A 63-bit seed for one (seed, epoch, stream) triple, well mixed by SeedSequence."""
    return int(np.random.SeedSequence([seed, epoch, stream]).generate_state(1, np.uint64)[0] >> 1)


class ArrayDataset(Dataset):
    """A split held in memory; ``__getitems__`` builds whole batches with one gather."""

    def __init__(self, split: Split, augment: bool, seed: int = 0) -> None:
        self.split = split
        self.augment = augment
        self.seed = seed
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        n = len(self.split)
        self.params = CropFlip.draw(n, self.seed, epoch) if self.augment else None

    def __len__(self) -> int:
        return len(self.split)

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = np.asarray(indices)
        images = self.split.images[idx]
        if self.params is not None:
            p = self.params
            images = crop_flip(images, p.dy[idx], p.dx[idx], p.flip[idx])
        # HWC -> CHW; contiguous so pinning and the copy move one dense block
        x = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))
        return x, torch.from_numpy(self.split.labels[idx])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.__getitems__([index])
        return x[0], y[0]


class EpochSampler(Sampler[int]):
    """A seeded permutation per epoch (or the natural order), set with ``set_epoch``."""

    def __init__(self, n: int, seed: int, shuffle: bool) -> None:
        self.n, self.seed, self.shuffle, self.epoch = n, seed, shuffle, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(range(self.n))
        g = torch.Generator().manual_seed(epoch_seed(self.seed, self.epoch, 1))
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self) -> int:
        return self.n


def _as_batch(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return batch  # __getitems__ already built the batch; a module-level function pickles


def make_loader(
    split: Split, batch_size: int, train: bool, seed: int, workers: int = 0, pin: bool = False, augment: bool = True
) -> DataLoader:
    dataset = ArrayDataset(split, augment=train and augment, seed=seed)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=EpochSampler(len(split), seed, shuffle=train),
        num_workers=workers,
        pin_memory=pin,
        collate_fn=_as_batch,
        drop_last=False,  # the last, shorter batch is still trained on
        # its own generator, so creating worker iterators never draws from the global RNG
        generator=torch.Generator().manual_seed(seed),
    )


def set_epoch(loader: DataLoader, epoch: int) -> None:
    """Point a loader from :func:`make_loader` at ``epoch`` (order and augmentation)."""
    loader.sampler.set_epoch(epoch)
    loader.dataset.set_epoch(epoch)


def order_fingerprint(n: int, seed: int, epochs: int, augment: bool) -> str:
    """A short hash of every epoch's sample order and augmentation parameters: runs with the
    same fingerprint saw identical training inputs in identical order."""
    digest = hashlib.sha256()
    sampler = EpochSampler(n, seed, shuffle=True)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        digest.update(np.asarray(list(sampler), dtype=np.int64).tobytes())
        if augment:
            p = CropFlip.draw(n, seed, epoch)
            for part in (p.dy, p.dx, p.flip):
                digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()[:16]
