"""quicktrain: fast, measured image-classification training.

Example:
    >>> import quicktrain
    >>> cfg = quicktrain.Config.from_overrides({"model.name": "test_vit", "run.epochs": 1})
    >>> cfg.model.name, cfg.run.batch_size
    ('test_vit', 128)
"""

# Transparent huge pages for large CPU tensors (PyTorch's THP_MEM_ALLOC_ENABLE=1) are left to the
# user: quicktrain set them by default until they measured 1.15x faster on one machine and 0.70-0.95x
# on another (benchmarks/host_allocator.py, once thp_alloc.py; RESULTS.md "Transparent huge pages"),
# so PyTorch's default allocator is kept. Set THP_MEM_ALLOC_ENABLE=1 before torch is imported to try
# them; each run's env.json records the setting. What does pay on a CPU is keeping freed memory
# for the next step: techniques.cpu_allocator=retain (quicktrain/techniques/cpu/allocator.py).

__version__ = "0.1.0"

from quicktrain.config import Config
from quicktrain.lazy import lazy_attributes

# torch, timm and Ignite load on first use of these, so `quicktrain --help` and `quicktrain
# report` start without them
_LAZY = {
    "RunResult": "quicktrain.engine",
    "train": "quicktrain.engine",
    "create_model": "quicktrain.models",
    "list_models": "quicktrain.models",
}


__getattr__ = lazy_attributes("quicktrain", _LAZY)


__all__ = ["Config", "RunResult", "__version__", "create_model", "list_models", "train"]
