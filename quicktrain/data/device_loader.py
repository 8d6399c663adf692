"""``--loader device``: the training split kept on the training device as one uint8 tensor.

Shuffling, random crop and flip run there as batched tensor ops (one gather per batch), the
optional cutout as one masked fill, the optional colour jitter as one affine map per batch;
no worker processes, no host-to-device copy per batch.
The order and the augmentation parameters are the DataLoader path's own
(:class:`EpochBatches`, :class:`CropFlip` from (seed, epoch)), so for one seed both loaders
yield identical batches.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np
import torch

from quicktrain.data.arrays import Split
from quicktrain.data.augment import PAD4_RANDOM_FLIP, PAD_MODES, AugmentSpec, CropFlip, cutout_mask, jitter_affine
from quicktrain.data.loader import EpochBatches
from quicktrain.errors import ConfigError


def crop_flip_tensor(
    padded: torch.Tensor,
    index: torch.Tensor,
    dy: torch.Tensor,
    dx: torch.Tensor,
    flip: torch.Tensor,
    pad: int = 4,
) -> torch.Tensor:
    """Crops of ``padded`` (N, C, H+2p, W+2p) at (dy, dx), mirrored where ``flip``, for the
    samples ``index``: one advanced-indexing gather -> (B, C, H, W)."""
    _, c, hp, wp = padded.shape
    h, w = hp - 2 * pad, wp - 2 * pad
    ar_h = torch.arange(h, device=padded.device)
    ar_w = torch.arange(w, device=padded.device)
    rows = dy[:, None] + ar_h  # (B, H)
    cols = dx[:, None] + torch.where(flip[:, None], ar_w.flip(0), ar_w)  # (B, W)
    channels = torch.arange(c, device=padded.device)
    return padded[
        index[:, None, None, None], channels[None, :, None, None], rows[:, None, :, None], cols[:, None, None, :]
    ]


class DeviceLoader:
    """Iterates effective batches of (uint8 images, labels) already on ``device``."""

    def __init__(
        self,
        split: Split,
        batch_size: int,
        seed: int,
        device: torch.device,
        augment: bool = True,
        rank: int = 0,
        world: int = 1,
        spec: AugmentSpec = PAD4_RANDOM_FLIP,
    ) -> None:
        self.batch_sampler = EpochBatches(len(split), batch_size, seed, shuffle=True, rank=rank, world=world)
        self.n, self.seed, self.augment, self.device, self.spec = len(split), seed, augment, device, spec
        images = split.images  # (N, H, W, C) uint8 on the host
        if augment:  # padded on the host: the device holds one copy of the split, not the raw and the padded
            pad = ((0, 0), (spec.pad, spec.pad), (spec.pad, spec.pad), (0, 0))
            images = np.pad(images, pad, mode=PAD_MODES[spec.fill])
        try:
            nchw = np.ascontiguousarray(images.transpose(0, 3, 1, 2))  # laid out on the host too: one device copy
            self.padded = torch.from_numpy(nchw).to(device)  # (N, C, H', W') uint8
        except torch.OutOfMemoryError:
            raise ConfigError(
                f"data.loader=device: the training split ({images.nbytes / 2**30:.2f} GiB as uint8"
                f"{', padded' if augment else ''}) does not fit in {device}'s memory beside the model; "
                "use --loader torch (or --max-train-samples)"
            ) from None
        self.labels = torch.from_numpy(split.labels).to(device)
        self._params: tuple[int, dict[str, torch.Tensor]] | None = None
        self._pixel_stats = tuple(torch.from_numpy(a).to(device) for a in spec.pixel_stats())  # for colour jitter

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def _epoch_params(self, epoch: int) -> dict[str, torch.Tensor]:
        if self._params is None or self._params[0] != epoch:
            drawn = CropFlip.draw(self.n, self.seed, epoch, self.spec).arrays()
            self._params = (epoch, {name: torch.from_numpy(a).to(self.device) for name, a in drawn.items()})
        return self._params[1]

    def _augment(self, index: torch.Tensor, epoch: int) -> torch.Tensor:
        p = {name: values[index] for name, values in self._epoch_params(epoch).items()}
        x = crop_flip_tensor(self.padded, index, p["dy"], p["dx"], p["flip"], self.spec.pad)
        if "centre" in p:
            arange = functools.partial(torch.arange, device=self.device)
            mask = cutout_mask(p["centre"], self.spec.cutout, *x.shape[-2:], arange)
            x = x.masked_fill(mask[:, None], 0)
        if "shift" in p:
            a, d = jitter_affine(p["shift"], p["scale"], *self._pixel_stats)
            x = (x.float() * a[:, :, None, None] + d[:, :, None, None]).round_().clamp_(0, 255).to(torch.uint8)
        return x

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        batches = list(self.batch_sampler)  # this epoch's (rest of) batches, indices coded with the epoch
        if not batches:
            return
        # one host-to-device copy per epoch, then on-device slices: a copy per batch would block
        flat = torch.tensor([i for batch in batches for i in batch])
        flat = (flat.pin_memory() if self.device.type == "cuda" else flat).to(self.device, non_blocking=True)
        epoch = batches[0][0] // self.n  # a batch never spans two epochs, nor does an iteration
        for coded in flat.split([len(batch) for batch in batches]):
            index = coded % self.n
            yield (self._augment(index, epoch) if self.augment else self.padded[index]), self.labels[index]
