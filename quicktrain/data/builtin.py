"""The built-in datasets' loaders, as the registry calls them:
``(cfg, argument, progress, size_hint) -> Arrays`` (see :mod:`quicktrain.data.registry`)."""

from __future__ import annotations

from quicktrain.config import DataConfig
from quicktrain.data.arrays import Arrays
from quicktrain.errors import DataError


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
    from quicktrain.data.imagefolder import Reading, load_imagefolder

    r = Reading.from_config(cfg, progress, size_hint, tuple(cfg.classes) if cfg.classes else None)
    return load_imagefolder(
        argument, r.resolution, r.max_train, r.max_test, r.cache_dir, progress, r.load_test, r.mode, r.photo
    )


def wds(cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    """WebDataset shards, listed once, through the image folder's store and crops."""
    return _listed("quicktrain.data.webdataset:load_wds", "wds", cfg, argument, progress, size_hint)


def hf(cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    """A Hugging Face DatasetDict saved with save_to_disk, through the image folder's store and crops."""
    return _listed("quicktrain.data.hf:load_hf", "hf", cfg, argument, progress, size_hint)


def _listed(loader: str, name: str, cfg: DataConfig, argument: str, progress: bool, size_hint: int | None) -> Arrays:
    import importlib

    from quicktrain.data.imagefolder import Reading

    if cfg.classes:
        raise DataError(f"data.classes picks class folders of imagefolder:PATH datasets; {name}: takes every label")
    module, _, function = loader.partition(":")
    return getattr(importlib.import_module(module), function)(argument, Reading.from_config(cfg, progress, size_hint))
