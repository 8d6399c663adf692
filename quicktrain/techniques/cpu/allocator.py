"""Keeping freed host memory in the process (``techniques.cpu_allocator: retain``).

glibc serves every allocation above its mmap threshold (128 KB to 32 MB) with fresh pages from
the kernel and hands them back on ``free``. A CPU training step allocates its activations and
gradients (hundreds of MB at batch 1024) anew every update, so every update page-faults through
all of them again and the kernel zeroes each 4 KB page: on a 2-core Xeon about a quarter of the
speedrun recipe's step (benchmarks/host_allocator.py: 1.34x faster without the faults). ``retain``
tells glibc (``mallopt``) to serve large blocks from its heap and never to trim it, so a freed
block is reused by the next step with its pages already in place. The arithmetic is unchanged;
the cost is that the process keeps its peak memory until it exits. Process-wide and one-way (as
``cudnn.benchmark`` is): applied once when a run is built, and only when the run trains on a CPU
under glibc; elsewhere it does nothing and the record says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform
from dataclasses import dataclass

import torch

from quicktrain.techniques.base import Technique

# mallopt parameters, from glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
NEVER_TRIM = 2**31 - 1  # mallopt takes an int; 2 GB of free heap top before glibc trims


@dataclass(frozen=True)
class HostAllocator(Technique):
    requested: str  # "system" or "retain"
    active: bool
    note: str = ""  # why a requested "retain" does nothing
    name = "cpu_allocator"

    def apply(self) -> bool:
        """Set glibc's allocator to keep freed memory (once, at build time); True if it did."""
        if not self.active:
            return False
        libc = _glibc()
        ok = libc is not None and libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, NEVER_TRIM) == 1
        if not ok:
            logging.getLogger("quicktrain").warning("techniques.cpu_allocator=retain: glibc refused mallopt; no effect")
        return ok

    def apply_process(self) -> None:
        self.apply()  # one-way: glibc's settings stay for the process (see the module's docstring)

    def banner(self) -> str | None:
        if self.active:
            return "freed memory retained (glibc)"
        return self.inactive() if self.note else None

    def record(self) -> dict[str, object]:
        return {"cpu_allocator": self.requested, "cpu_allocator_active": self.active}


def resolve_host_allocator(requested: str, device: torch.device) -> HostAllocator:
    if requested != "retain":
        return HostAllocator(requested, False)
    if device.type != "cpu":
        return HostAllocator(requested, False, "CPU-only")
    if _glibc() is None:
        return HostAllocator(requested, False, f"needs glibc, this is {platform.system()} {platform.libc_ver()[0]}")
    return HostAllocator(requested, True)


def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") else None
