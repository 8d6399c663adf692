"""quicktrain: fast, measured image-classification training.

Example:
    >>> import quicktrain
    >>> cfg = quicktrain.Config.from_overrides({"model.name": "test_vit", "run.epochs": 1})
    >>> cfg.accumulation()
    (128, 1)
"""

import os
import sys

# Large CPU tensors on 2 MB transparent huge pages (PyTorch's own allocator switch). Without it
# glibc maps every activation buffer of tens of MB afresh on each step and the kernel spends a
# third of the CPU time on page faults (benchmarks/thp_alloc.py measures the difference).
# PyTorch reads it once, at its first allocation, so it only takes effect when quicktrain is
# imported before torch (as in `quicktrain ...` and `python -m quicktrain`). Set
# THP_MEM_ALLOC_ENABLE=0 to turn it off.
if sys.platform.startswith("linux") and "torch" not in sys.modules:
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

__version__ = "0.1.0"

from quicktrain.config import Config

# torch, timm and Ignite load on first use of these, so `quicktrain --help` and `quicktrain
# report` start without them
_LAZY = {
    "RunResult": "quicktrain.engine",
    "train": "quicktrain.engine",
    "create_model": "quicktrain.models",
    "list_models": "quicktrain.models",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'quicktrain' has no attribute '{name}'")


__all__ = ["Config", "RunResult", "__version__", "create_model", "list_models", "train"]
