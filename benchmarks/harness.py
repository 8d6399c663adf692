"""The rules every quicktrain benchmark follows, in one place.

- Both sides run in the same process and the same run, interleaved trial by trial
  (A B A B ...), so drift of a shared machine hits them alike.
- Warm-up runs first and is never timed (allocator, oneDNN/cuDNN kernel selection, compile).
- The device is synchronised before the clock is read, at both ends.
- Each side is timed over several trials; we report the median and the min-max spread,
  and the ratio of throughputs per trial pair (median and spread), never a lone time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from quicktrain.metrics import synchronize


@dataclass
class Side:
    name: str
    # does the work once, returns how many images it processed; or (images, seconds) when the
    # side times its own steady-state part (a framework's per-call set-up left out)
    run: Callable[[], int | tuple[int, float]]
    device: torch.device


def timed(side: Side) -> float:
    """Images per second for one call of ``side.run``."""
    synchronize(side.device)
    start = time.perf_counter()
    done = side.run()
    synchronize(side.device)
    elapsed = time.perf_counter() - start
    if isinstance(done, tuple):
        done, elapsed = done
    return done / elapsed


def compare(sides: list[Side], repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Throughput of each side per trial, interleaved, after ``warmup`` untimed calls each."""
    for side in sides:
        for _ in range(warmup):
            side.run()
    results: dict[str, list[float]] = {s.name: [] for s in sides}
    for trial in range(repeats):
        order = sides if trial % 2 == 0 else sides[::-1]  # alternate who goes first
        for side in order:
            results[side.name].append(timed(side))
    return results


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.4g} [{min(values):.4g}-{max(values):.4g}]"


def ratios(results: dict[str, list[float]], numerator: str, denominator: str) -> list[float]:
    return [a / b for a, b in zip(results[numerator], results[denominator])]
