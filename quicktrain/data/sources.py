"""Turn ``data.dataset`` into decoded arrays: the one place that knows every dataset name."""

from __future__ import annotations

import dataclasses
from typing import Any

from quicktrain.config import DataConfig
from quicktrain.data.arrays import Arrays, balanced_subset, carve_validation
from quicktrain.errors import DataError

DATASETS = ("sample", "synthetic", "synthetic:CLASSES", "mnist5k", "digits", "cifar10", "cifar100", "imagefolder:PATH")


def load_arrays(
    cfg: DataConfig,
    progress: bool = True,
    seed: int = 0,
    objects: tuple[Any, Any] | None = None,
    size_hint: int | None = None,
) -> Arrays:
    """Load (and subset) the dataset named by ``cfg.dataset``, or the user's ``(train_data,
    test_data)`` datasets; carve the validation split (chosen by ``seed``) out of the training
    split; leave the test split unread unless ``cfg.load_test``. ``size_hint`` (the model's
    image size) is the training size of a photo folder when ``cfg.resolution`` is not given."""
    from quicktrain.data.decode import set_pixel_limit

    if cfg.max_image_pixels is not None:
        set_pixel_limit(cfg.max_image_pixels)  # before any file is opened, here or in a worker
    if objects is not None:
        from quicktrain.data.objects import arrays_from_datasets

        arrays = subset(arrays_from_datasets(*objects, progress=progress), cfg.max_train_samples, cfg.max_test_samples)
    else:
        arrays = _load(cfg, progress, size_hint)
    if not cfg.load_test:
        arrays = dataclasses.replace(arrays, test=None)
    if cfg.val_fraction > 0:
        rest, val = carve_validation(arrays.train, cfg.val_fraction, seed)
        arrays = dataclasses.replace(arrays, train=rest, val=val)
    return arrays


def _load(cfg: DataConfig, progress: bool, size_hint: int | None = None) -> Arrays:
    name = cfg.dataset
    if name.startswith("imagefolder:"):
        from quicktrain.data.imagefolder import PhotoOptions, load_imagefolder

        path = name.partition(":")[2]
        if not path:
            raise DataError("imagefolder needs a path: --dataset imagefolder:PATH")
        classes = tuple(cfg.classes) if cfg.classes else None
        # subsets are chosen before decoding, so a small run decodes only what it uses
        return load_imagefolder(
            path,
            cfg.resolution,
            cfg.max_train_samples,
            cfg.max_test_samples,
            cfg.cache_dir,
            progress,
            cfg.load_test,
            cfg.data_mode,
            PhotoOptions(
                cfg.crop, cfg.crop_pct, cfg.store_size, size_hint, cfg.workers or None, classes, cfg.eval_split
            ),
        )
    if cfg.eval_split != "auto":
        raise DataError(f"data.eval_split picks the held-out folder of imagefolder:PATH datasets; {name} has its own")
    if cfg.classes:
        raise DataError(f"data.classes picks class folders of imagefolder:PATH datasets; {name} has fixed classes")
    if cfg.crop == "resized":
        raise DataError(f"data.crop=resized is for imagefolder:PATH folders of photos; {name} holds fixed-size images")
    if cfg.data_mode == "stream":
        raise DataError(f"data.data_mode=stream works for imagefolder:PATH datasets; {name} is read into memory")
    if name == "synthetic" or name.startswith("synthetic:"):
        from quicktrain.data.synthetic import make_synthetic

        classes = name.partition(":")[2] or "10"
        if not classes.isdigit() or int(classes) < 2:
            raise DataError(f"synthetic:{classes} needs a number of classes of at least 2, e.g. synthetic:100")
        return make_synthetic(cfg.max_train_samples or 512, cfg.max_test_samples or 128, num_classes=int(classes))
    if name == "sample":
        from quicktrain.data.sample import load_sample

        arrays = load_sample()
    elif name in ("mnist5k", "digits"):
        from quicktrain.data.digits import load_digit_set

        arrays = load_digit_set(name)
    elif name in ("cifar10", "cifar100"):
        from quicktrain.data.cifar import load_cifar

        arrays = load_cifar(name, cfg.data_dir, cfg.download, cfg.load_test)
    else:
        raise DataError(f"unknown dataset '{name}'; accepted: {', '.join(DATASETS)}")
    return subset(arrays, cfg.max_train_samples, cfg.max_test_samples)


def subset(arrays: Arrays, max_train: int | None, max_test: int | None) -> Arrays:
    if max_train is None and max_test is None:
        return arrays
    return dataclasses.replace(
        arrays,
        train=arrays.train.take(balanced_subset(arrays.train.labels, max_train)),
        test=arrays.test.take(balanced_subset(arrays.test.labels, max_test)) if arrays.test is not None else None,
    )
