"""Honest clocks: wait for the device before reading the time; peak memory per device."""

from __future__ import annotations

import resource
import sys
import time

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """Accumulates time over start/stop pairs, synchronising the device at each edge so
    queued GPU work is counted where it runs, not where it was issued."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.total = 0.0
        self._started: float | None = None

    def start(self) -> None:
        synchronize(self.device)
        self._started = time.perf_counter()

    @property
    def running(self) -> bool:
        return self._started is not None

    def elapsed(self, sync: bool = True) -> float:
        """Length of the running interval so far (0 when stopped). ``sync=False`` reads the
        host clock only: no device sync, so queued GPU work is not yet counted (a budget
        check per update can afford that; a measurement cannot)."""
        if self._started is None:
            return 0.0
        if sync:
            synchronize(self.device)
        return time.perf_counter() - self._started

    def stop(self) -> float:
        """Stop and return the length of this interval."""
        assert self._started is not None, "stop() without start()"
        synchronize(self.device)
        interval = time.perf_counter() - self._started
        self.total += interval
        self._started = None
        return interval


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mb(device: torch.device) -> tuple[float, str]:
    """(megabytes, what was measured): CUDA's peak allocation, or the process's peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / (2**20 if sys.platform == "darwin" else 2**10), "process_max_rss"
