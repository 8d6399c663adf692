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
    from quicktrain.data.imagefolder import PhotoOptions, load_imagefolder

    classes = tuple(cfg.classes) if cfg.classes else None
    options = PhotoOptions(
        cfg.crop, cfg.crop_pct, cfg.store_size, size_hint, cfg.workers or None, classes, cfg.eval_split
    )
    return load_imagefolder(
        argument, cfg.resolution, cfg.max_train_samples, cfg.max_test_samples, cfg.cache_dir, progress,
        cfg.load_test, cfg.data_mode, options,
    )  # fmt: skip
