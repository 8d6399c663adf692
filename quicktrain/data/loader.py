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
from quicktrain.data.augment import PAD4_RANDOM_FLIP, AugmentSpec, CropFlip, color_jitter, crop_flip, cutout


def epoch_seed(seed: int, epoch: int, stream: int) -> int:
    """A 63-bit seed for one (seed, epoch, stream) triple, well mixed by SeedSequence."""
    return int(np.random.SeedSequence([seed, epoch, stream]).generate_state(1, np.uint64)[0] >> 1)


class ArrayDataset(Dataset):
    """A split held in memory; ``__getitems__`` builds whole batches with one gather.

    Indices arrive as ``epoch * len(split) + i``: the epoch travels with every index, so
    augmentation is right in worker processes too, whatever epoch they were started in."""

    def __init__(self, split: Split, augment: bool, seed: int = 0, spec: AugmentSpec = PAD4_RANDOM_FLIP) -> None:
        self.split = split
        self.augment = augment
        self.seed = seed
        self.spec = spec
        self._params: tuple[int, CropFlip] | None = None

    def params(self, epoch: int) -> CropFlip:
        if self._params is None or self._params[0] != epoch:
            self._params = (epoch, CropFlip.draw(len(self.split), self.seed, epoch, self.spec))
        return self._params[1]

    def __len__(self) -> int:
        return len(self.split)

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, idx = np.divmod(np.asarray(indices), len(self.split))
        if not self.augment:
            images = self.split.images[idx]
        else:
            p = self.params(int(epoch[0]))  # a batch never spans two epochs
            if self.spec.crop == "resized":  # photos: crops of the stored images, not of the evaluation crops
                s = self.spec
                images = self.split.images.train_crops(idx, self.seed, int(epoch[0]), p.flip[idx], s.scale, s.ratio)
            else:
                images = crop_flip(
                    self.split.images[idx], p.dy[idx], p.dx[idx], p.flip[idx], self.spec.pad, self.spec.fill
                )
            if p.centre is not None:
                images = cutout(images, p.centre[idx], self.spec.cutout)
            if p.shift is not None:
                images = color_jitter(images, p.shift[idx], p.scale[idx], self.spec)
        # HWC -> CHW; contiguous so pinning and the copy move one dense block
        x = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))
        return x, torch.from_numpy(self.split.labels[idx])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.__getitems__([index])
        return x[0], y[0]


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The seeded permutation of ``range(n)`` for one epoch."""
    g = torch.Generator().manual_seed(epoch_seed(seed, epoch, 1))
    return torch.randperm(n, generator=g).tolist()


class EpochBatches(Sampler[list[int]]):
    """Batches of one epoch: a seeded permutation (or the natural order) cut into global
    batches; under data parallelism each rank takes its equal slice of every global batch.

    Each ``iter()`` is the next epoch, from ``start_batch`` (then 0); :func:`set_epoch` points
    it elsewhere. Ignite asks for a fresh iterator once per epoch, sometimes before the epoch's
    start event, so the loader keeps its own epoch count rather than being told each time.
    With ``world > 1`` a global batch is trimmed to a multiple of ``world`` (the epoch's last,
    short batch loses at most ``world - 1`` samples) so every rank holds the same number."""

    def __init__(self, n: int, batch_size: int, seed: int, shuffle: bool, rank: int = 0, world: int = 1) -> None:
        self.n, self.batch_size, self.seed, self.shuffle = n, batch_size, seed, shuffle
        self.rank, self.world = rank, world
        self.epoch, self.start_batch = 0, 0

    def global_batches(self, epoch: int) -> list[list[int]]:
        order = epoch_order(self.n, self.seed, epoch) if self.shuffle else list(range(self.n))
        return [order[i : i + self.batch_size] for i in range(0, self.n, self.batch_size)]

    def local(self, batch: list[int]) -> list[int]:
        share = len(batch) // self.world
        return batch[self.rank * share : (self.rank + 1) * share]

    def __iter__(self) -> Iterator[list[int]]:
        epoch, start = self.epoch, self.start_batch
        self.epoch, self.start_batch = epoch + 1, 0
        offset = epoch * self.n
        for batch in self.global_batches(epoch)[start:]:
            mine = self.local(batch)
            if mine:
                yield [offset + i for i in mine]

    def __len__(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest >= self.world else 0)


class EvalShards(Sampler[list[int]]):
    """Evaluation batches of this rank's shard (every ``world``-th sample): together the ranks
    cover the whole split exactly once, so summed counts give the full-split metrics."""

    def __init__(self, n: int, batch_size: int, rank: int = 0, world: int = 1) -> None:
        self.indices = list(range(rank, n, world))
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[list[int]]:
        for i in range(0, len(self.indices), self.batch_size):
            yield self.indices[i : i + self.batch_size]

    def __len__(self) -> int:
        return -(-len(self.indices) // self.batch_size)


def _as_batch(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return batch  # __getitems__ already built the batch; a module-level function pickles


def make_loader(
    split: Split,
    batch_size: int,
    train: bool,
    seed: int,
    workers: int = 0,
    pin: bool = False,
    augment: bool = True,
    rank: int = 0,
    world: int = 1,
    spec: AugmentSpec = PAD4_RANDOM_FLIP,
) -> DataLoader:
    """A training loader (global batches of ``batch_size``, this rank's slice of each) or an
    evaluation loader (this rank's shard in batches of ``batch_size``)."""
    dataset = ArrayDataset(split, augment=train and augment, seed=seed, spec=spec)
    batches = (
        EpochBatches(len(split), batch_size, seed, shuffle=True, rank=rank, world=world)
        if train
        else EvalShards(len(split), batch_size, rank, world)
    )
    return DataLoader(
        dataset,
        batch_sampler=batches,
        num_workers=workers,
        pin_memory=pin,
        collate_fn=_as_batch,
        persistent_workers=workers > 0,  # started once, not every epoch (the epoch travels with the indices)
        # its own generator, so creating worker iterators never draws from the global RNG
        generator=torch.Generator().manual_seed(seed),
    )


def set_epoch(loader: DataLoader, epoch: int, start_batch: int = 0) -> None:
    """Make the next pass over a training loader from :func:`make_loader` be ``epoch``
    (0-based), starting at its ``start_batch``-th batch (resuming mid-epoch)."""
    loader.batch_sampler.epoch = epoch
    loader.batch_sampler.start_batch = start_batch


def order_fingerprint(n: int, seed: int, epochs: int, augment: bool, spec: AugmentSpec = PAD4_RANDOM_FLIP) -> str:
    """A short hash of every epoch's sample order and augmentation parameters: runs with the
    same fingerprint saw identical training inputs in identical order."""
    digest = hashlib.sha256(repr((spec.crop, spec.scale, spec.ratio)).encode() if spec.crop == "resized" else b"")
    for epoch in range(epochs):
        digest.update(np.asarray(epoch_order(n, seed, epoch), dtype=np.int64).tobytes())
        if augment:
            p = CropFlip.draw(n, seed, epoch, spec)
            for part in p.arrays().values():
                digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()[:16]
