"""Turn ``data.dataset`` into decoded arrays through the dataset registry (:mod:`quicktrain.data.registry`),
then subset them and carve the validation split."""

from __future__ import annotations

import dataclasses
from typing import Any

from quicktrain.config import DataConfig
from quicktrain.data.arrays import Arrays, balanced_subset, carve_validation
from quicktrain.data.registry import lookup, names
from quicktrain.errors import DataError

DATASETS = names()  # every accepted spelling (the registry's, at import)


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
    entry, argument = lookup(cfg.dataset)
    name = cfg.dataset
    if not entry.files:  # the options of files on disk, refused where nothing reads them
        if cfg.eval_split != "auto":
            raise DataError(
                f"data.eval_split picks the held-out folder of imagefolder:PATH datasets; {name} has its own"
            )
        if cfg.classes:
            raise DataError(f"data.classes picks class folders of imagefolder:PATH datasets; {name} has fixed classes")
        if cfg.crop == "resized":
            raise DataError(
                f"data.crop=resized is for imagefolder:PATH folders of photos; {name} holds fixed-size images"
            )
        if cfg.data_mode == "stream":
            raise DataError(f"data.data_mode=stream works for imagefolder:PATH datasets; {name} is read into memory")
    arrays = entry.loader()(cfg, argument, progress, size_hint)
    return arrays if entry.subsets else subset(arrays, cfg.max_train_samples, cfg.max_test_samples)


def subset(arrays: Arrays, max_train: int | None, max_test: int | None) -> Arrays:
    if max_train is None and max_test is None:
        return arrays
    return dataclasses.replace(
        arrays,
        train=arrays.train.take(balanced_subset(arrays.train.labels, max_train)),
        test=arrays.test.take(balanced_subset(arrays.test.labels, max_test)) if arrays.test is not None else None,
    )
