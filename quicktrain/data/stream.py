"""Image folders bigger than memory: images decoded per batch, in the DataLoader's workers.

:class:`FileImages` looks like the in-memory ``(N, H, W, 3)`` uint8 array to everything that
indexes it (``images[idx]`` with an index array or a slice decodes just those files, with the
same decoder and resize as the decode cache), so the streaming path shares the in-memory
path's sampler, seeded order, augmentation and torchrun sharding: for a seed the two yield
identical batches. Nothing is held but the file list.

``data.data_mode=auto`` streams when the decoded training and test splits would exceed the
memory budget (``$QUICKTRAIN_MEMORY_BUDGET_MB``, else half of the available memory shared by
the processes of this machine), and decodes into memory otherwise.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from quicktrain.data.decode import Source, decode_image, digest_sources


class FileImages:
    """``N`` image files as a lazy ``(N, resolution, resolution, 3)`` uint8 array."""

    dtype = np.dtype(np.uint8)
    ndim = 4

    def __init__(self, paths: list[Source], resolution: int) -> None:
        self.paths = list(paths)
        self.resolution = resolution

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (len(self.paths), self.resolution, self.resolution, 3)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: slice | np.ndarray | list[int]) -> np.ndarray:
        chosen = self.paths[index] if isinstance(index, slice) else [self.paths[int(i)] for i in np.asarray(index)]
        out = np.empty((len(chosen), self.resolution, self.resolution, 3), dtype=np.uint8)
        for i, path in enumerate(chosen):
            out[i] = decode_image(path, self.resolution)
        return out

    def take(self, indices: np.ndarray) -> FileImages:
        return FileImages([self.paths[int(i)] for i in indices], self.resolution)

    def fingerprint(self) -> str:
        """The files (names, sizes, times) and the resolution: a key for cached statistics."""
        return digest_sources(hashlib.sha256(f"{self.resolution}".encode()), self.paths).hexdigest()


def memory_budget_bytes(processes: int = 1) -> int:
    """How much decoded data one process may hold: ``$QUICKTRAIN_MEMORY_BUDGET_MB``, else half
    of the machine's available memory divided among its processes."""
    given = os.environ.get("QUICKTRAIN_MEMORY_BUDGET_MB")
    if given:
        return int(float(given) * 2**20)
    available = _available_bytes()
    return available // 2 // max(processes, 1)


def _available_bytes() -> int:
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def decoded_bytes(count: int, resolution: int) -> int:
    return count * resolution * resolution * 3
