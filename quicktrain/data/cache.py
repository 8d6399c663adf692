"""Where decoded arrays are cached, and writing them so a crash never leaves half a file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np


def cache_root(cache_dir: str | None = None) -> Path:
    root = Path(cache_dir or os.environ.get("QUICKTRAIN_CACHE") or Path.home() / ".cache" / "quicktrain")
    root.expanduser().mkdir(parents=True, exist_ok=True)
    return root.expanduser()


def atomic_save_npz(path: Path, **arrays: np.ndarray) -> None:
    """Write to a temporary file beside ``path``, then rename: readers see all or nothing."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
