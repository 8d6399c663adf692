"""Where decoded arrays are cached; written atomically, so a crash leaves no half file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from quicktrain.atomic import atomic_write


def cache_root(cache_dir: str | None = None) -> Path:
    root = Path(cache_dir or os.environ.get("QUICKTRAIN_CACHE") or Path.home() / ".cache" / "quicktrain")
    root.expanduser().mkdir(parents=True, exist_ok=True)
    return root.expanduser()


def atomic_save_npz(path: Path, **arrays: np.ndarray) -> None:
    atomic_write(path, lambda f: np.savez(f, **arrays))
