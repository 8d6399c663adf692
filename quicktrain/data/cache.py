"""Where decoded arrays are cached; written atomically, so a crash leaves no half file. A
cache file damaged some other way (a disk fault, a copy cut short) is reported once, removed
and rebuilt, instead of failing every later run."""

from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path

import numpy as np

from quicktrain.atomic import atomic_write

log = logging.getLogger("quicktrain")


def cache_root(cache_dir: str | None = None) -> Path:
    root = Path(cache_dir or os.environ.get("QUICKTRAIN_CACHE") or Path.home() / ".cache" / "quicktrain")
    root.expanduser().mkdir(parents=True, exist_ok=True)
    return root.expanduser()


def atomic_save_npz(path: Path, **arrays: np.ndarray) -> None:
    atomic_write(path, lambda f: np.savez(f, **arrays))


def load_cached(path: Path, *names: str) -> dict[str, np.ndarray] | None:
    """The arrays ``names`` of a cache file, or None when it is missing or damaged (then it is
    deleted, so the caller decodes again and writes a good one)."""
    if not path.is_file():
        return None
    try:
        with np.load(path) as cached:
            return {name: cached[name] for name in names}
    except (zipfile.BadZipFile, OSError, ValueError, KeyError, EOFError) as err:
        log.warning(f"decoded-image cache '{path}' is damaged ({type(err).__name__}: {err}); rebuilding it")
        path.unlink(missing_ok=True)
        return None
