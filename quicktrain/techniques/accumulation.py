"""Gradient accumulation, planned in pure functions.

The loader yields effective batches; :func:`split_sizes` cuts one into micro-batches. A
window (the micro-batches of one optimizer update) is normally ``accum_steps`` long, but
the last batch of an epoch may be shorter: it is still one update (flushed, never dropped
or carried into the next epoch), and each micro-batch's mean loss is weighted by its share
of the samples actually in the window, so the update equals one big batch's exactly.

Example: 10 micro-batches of 8 per epoch with 4 accumulation steps
    >>> [len(w) for w in plan_epoch(num_samples=80, batch_size=32, micro_batch_size=8)]
    [4, 4, 2]

The split of the effective batch into micro-batches is derived here, from the config (which only
checks that the split is possible):

    >>> split_batch(128, micro=None, accum=4), split_batch(128, micro=32, accum=None)
    ((32, 4), (32, 4))
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any

from quicktrain.errors import ConfigError
from quicktrain.techniques.base import Technique


@dataclass(frozen=True)
class Accumulation(Technique):
    batch_size: int  # effective: samples per optimizer update (of this process)
    micro_batch_size: int  # samples per forward/backward
    accum_steps: int  # micro-batches per full window
    auto: bool = False  # techniques.micro_batch_size=auto: measured once the model is built
    name = "ga"

    @property
    def active(self) -> bool:
        return self.accum_steps > 1

    @property
    def split(self) -> tuple[int, int]:
        """(micro-batch size, accumulation steps)."""
        return self.micro_batch_size, self.accum_steps

    def updates_per_epoch(self, num_samples: int) -> int:
        return math.ceil(num_samples / self.batch_size)

    def micro_batches(self, window: int) -> tuple[list[int], list[float]]:
        """The micro-batch sizes of a window of ``window`` samples and each one's loss weight."""
        sizes = split_sizes(window, self.micro_batch_size)
        return sizes, micro_weights(sizes)

    def plan(self, num_samples: int) -> list[list[int]]:
        """Every window of an epoch of ``num_samples`` as its micro-batch sizes."""
        return plan_epoch(num_samples, self.batch_size, self.micro_batch_size)

    def with_micro_batch(self, micro_batch_size: int) -> Accumulation:
        """The same effective batch in micro-batches of ``micro_batch_size`` (the out-of-memory retry
        halves it: twice the steps, the same update)."""
        steps = math.ceil(self.batch_size / micro_batch_size)
        return replace(self, micro_batch_size=micro_batch_size, accum_steps=steps)

    def settle(self, model: Any, techniques: Any, image_size: int, num_classes: int, device: Any) -> Accumulation:
        """With ``micro_batch_size=auto``: the largest micro-batch that fits, measured on the built model."""
        if not self.auto:
            return self
        from quicktrain.techniques.micro_batch import Prober

        batch = self.batch_size
        micro, how = Prober(model, techniques.precision, image_size, num_classes, device).choose(batch)
        logging.getLogger("quicktrain").info(
            f"auto micro-batch: {micro} ({batch // micro} accumulation step{'s' if batch > micro else ''} "
            f"for {batch} per update; {how})"
        )
        return replace(self, micro_batch_size=micro, accum_steps=batch // micro, auto=False)

    def record(self) -> dict[str, object]:
        return {
            "batch_size": self.batch_size,
            "micro_batch_size": self.micro_batch_size,
            "accum_steps": self.accum_steps,
        }


def split_batch(batch: int, micro: int | str | None, accum: int | None) -> tuple[int, int]:
    """(micro-batch size, accumulation steps) for ``batch`` samples per update, from whichever of
    the two the config sets (``micro="auto"``: the whole batch until the run measures what fits)."""
    if micro == "auto" or (micro is None and accum is None):
        return batch, 1
    if isinstance(micro, int):
        return micro, batch // micro
    assert accum is not None
    return batch // accum, accum


def resolve(cfg: Any, device: Any = None, distributed: Any = None) -> Accumulation:
    """This process's share of the effective (global) batch, split into micro-batches."""
    world = distributed.world if distributed is not None else 1
    if cfg.run.batch_size % world:
        raise ConfigError(
            f"run.batch_size={cfg.run.batch_size} is the global batch and must divide evenly over "
            f"{world} processes; use a multiple of {world}"
        )
    batch = cfg.run.batch_size // world
    t = cfg.techniques
    if isinstance(t.micro_batch_size, int) and batch % t.micro_batch_size:
        raise ConfigError(
            f"techniques.micro_batch_size={t.micro_batch_size} does not divide this process's share of the batch "
            f"({cfg.run.batch_size} over {world} processes = {batch})"
        )
    if t.accum_steps is not None and batch % t.accum_steps:
        raise ConfigError(
            f"techniques.accum_steps={t.accum_steps} does not divide this process's share of the batch "
            f"({cfg.run.batch_size} over {world} processes = {batch})"
        )
    micro, accum = split_batch(batch, t.micro_batch_size, t.accum_steps)
    return Accumulation(batch, micro, accum, auto=t.micro_batch_size == "auto")


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
