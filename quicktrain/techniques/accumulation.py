"""Gradient accumulation, planned in pure functions.

The loader yields effective batches; :func:`split_sizes` cuts one into micro-batches. A
window (the micro-batches of one optimizer update) is normally ``accum_steps`` long, but
the last batch of an epoch may be shorter: it is still one update (flushed, never dropped
or carried into the next epoch), and each micro-batch's mean loss is weighted by its share
of the samples actually in the window, so the update equals one big batch's exactly.

Example: 10 micro-batches of 8 per epoch with 4 accumulation steps
    >>> [len(w) for w in plan_epoch(num_samples=80, batch_size=32, micro_batch_size=8)]
    [4, 4, 2]
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Accumulation:
    batch_size: int  # effective: samples per optimizer update
    micro_batch_size: int  # samples per forward/backward
    accum_steps: int  # micro-batches per full window

    def updates_per_epoch(self, num_samples: int) -> int:
        return math.ceil(num_samples / self.batch_size)


def split_sizes(n: int, micro_batch_size: int) -> list[int]:
    """Micro-batch sizes for a window of ``n`` samples; only the last may be short.

    >>> split_sizes(10, 4)
    [4, 4, 2]
    """
    full, rest = divmod(n, micro_batch_size)
    return [micro_batch_size] * full + ([rest] if rest else [])


def plan_epoch(num_samples: int, batch_size: int, micro_batch_size: int) -> list[list[int]]:
    """Every window of an epoch as its list of micro-batch sizes."""
    return [
        split_sizes(min(batch_size, num_samples - start), micro_batch_size)
        for start in range(0, num_samples, batch_size)
    ]


def micro_weights(sizes: list[int]) -> list[float]:
    """Weight of each micro-batch's mean loss: its share of the window's samples.

    >>> micro_weights([4, 4, 2])
    [0.4, 0.4, 0.2]
    """
    total = sum(sizes)
    return [s / total for s in sizes]
