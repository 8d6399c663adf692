"""The built-in datasets' loaders, as the registry calls them:
``(cfg, argument, progress, size_hint) -> Arrays`` (see :mod:`quicktrain.data.registry`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from quicktrain.config import DataConfig
from quicktrain.data.arrays import Arrays
from quicktrain.errors import DataError

if TYPE_CHECKING:
    from quicktrain.data.imagefolder import Reading


def sample(cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    from quicktrain.data.sample import load_sample

    return load_sample()


def synthetic(cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    from quicktrain.data.synthetic import make_synthetic

    classes = argument or "10"
    if not classes.isdigit() or int(classes) < 2:
        raise DataError(f"synthetic:{classes} needs a number of classes of at least 2, e.g. synthetic:100")
    return make_synthetic(cfg.max_train_samples or 512, cfg.max_test_samples or 128, num_classes=int(classes))


def digit_set(cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    from quicktrain.data.digits import load_digit_set

    return load_digit_set(cfg.dataset)


def cifar(cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    from quicktrain.data.cifar import load_cifar

    return load_cifar(cfg.dataset, cfg.data_dir, cfg.download, cfg.load_test)


def imagefolder(cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    """Subsets are chosen before decoding, so a small run decodes only what it uses."""
    from quicktrain.data.imagefolder import read_imagefolder

    return read_imagefolder(argument, _reading(cfg, progress, size_hint, "imagefolder"))


def wds(cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    """WebDataset shards, listed once, through the image folder's store and crops."""
    from quicktrain.data.webdataset import load_wds

    return load_wds(argument, _reading(cfg, progress, size_hint, "wds"))


def hf(cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    """A Hugging Face DatasetDict saved with save_to_disk, through the image folder's store and crops."""
    from quicktrain.data.hf import load_hf

    return load_hf(argument, _reading(cfg, progress, size_hint, "hf"))


def _reading(cfg: DataConfig, progress: bool, size_hint: int | None, name: str) -> Reading:
    """The options every listed source reads with; only image folders choose classes (by folder)."""
    from quicktrain.data.imagefolder import Reading

    if cfg.classes and name != "imagefolder":
        raise DataError(f"data.classes picks class folders of imagefolder:PATH datasets; {name}: takes every label")
    return Reading.from_config(cfg, progress, size_hint, tuple(cfg.classes) if cfg.classes else None)
