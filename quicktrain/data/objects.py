"""The user's own map-style datasets, decoded once into the in-memory form every other dataset
takes, so every technique, loader and guarantee applies to them unchanged.

An item is ``(image, label)``: the image a PIL image, a uint8 tensor or array (C, H, W) or
(H, W, C), a float one with values in [0, 1] (stored as uint8: exact for images that came from
8-bit files), or grayscale (H, W) / (1, H, W), which is repeated over three channels; the label
an int. Every image must have the same square size (resize in the dataset's transform).

A dataset is read once, so a random transform (torchvision's ``RandomResizedCrop``, ``RandAugment``,
...) would be frozen to one draw for the whole run: it is refused with a one-line error saying what to
do instead (drop it and let quicktrain augment per epoch, or save the images as a folder for
``imagefolder:PATH``, whose photos get RandomResizedCrop per epoch). Random transforms are found by
name in the dataset's ``transform`` and by reading the first item under several seeds.

Example:
    >>> import torch
    >>> from torch.utils.data import TensorDataset
    >>> data = TensorDataset(torch.zeros(4, 3, 8, 8), torch.tensor([0, 1, 0, 1]))
    >>> arrays = arrays_from_datasets(data, data)
    >>> arrays.train.images.shape, arrays.classes
    ((4, 8, 8, 3), ('0', '1'))
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tqdm import tqdm

from quicktrain.data.arrays import Arrays, Split
from quicktrain.errors import DataError


def arrays_from_datasets(train_data: Any, test_data: Any | None, progress: bool = False) -> Arrays:
    train = _split(train_data, "train_data", progress)
    test = _split(test_data, "test_data", progress) if test_data is not None else None
    labels = np.concatenate([train.labels, *([test.labels] if test is not None else [])])
    if labels.min() < 0:
        raise DataError(f"labels must be 0, 1, ..., got {int(labels.min())}")
    classes = getattr(train_data, "classes", None)
    if classes is None or len(classes) <= labels.max():
        classes = [str(i) for i in range(int(labels.max()) + 1)]
    if test is not None and test.images.shape[1:] != train.images.shape[1:]:
        raise DataError(f"test_data images are {test.images.shape[1:3]}, train_data's {train.images.shape[1:3]}")
    name = f"object:{type(train_data).__name__}"
    return Arrays(name, tuple(map(str, classes)), train, test, source="python objects passed to train()")


def _split(dataset: Any, what: str, progress: bool) -> Split:
    try:
        n = len(dataset)
    except TypeError:
        raise DataError(f"{what} must be a map-style dataset (with __len__ and __getitem__)") from None
    if n == 0:
        raise DataError(f"{what} is empty")
    _refuse_random_transform(dataset, what)
    first = _image(dataset[0][0], what, 0)
    images = np.empty((n, *first.shape), dtype=np.uint8)
    labels = np.empty(n, dtype=np.int64)
    for i in tqdm(range(n), desc=f"reading {what}", unit="img", disable=not progress, leave=False):
        image, label = dataset[i]
        array = first if i == 0 else _image(image, what, i)
        if array.shape != first.shape:
            raise DataError(f"{what}[{i}] is {array.shape[:2]}, {what}[0] {first.shape[:2]}: resize to one size")
        images[i], labels[i] = array, int(label)
    if first.shape[0] != first.shape[1]:
        raise DataError(f"{what} images are {first.shape[0]}x{first.shape[1]}; square images are needed")
    return Split(images, labels)


RANDOM_TRANSFORMS = ("ColorJitter", "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix", "GaussianBlur",
                     "ElasticTransform", "MixUp", "CutMix")  # fmt: skip
_SEEDS = 6  # reads of the first item; a transform random only in a flip looks fixed with chance 1/32


def _refuse_random_transform(dataset: Any, what: str) -> None:
    found = _random_by_name(getattr(dataset, "transform", None)) or _random_by_reading(dataset)
    if found:
        raise DataError(
            f"{what} has a random transform ({found}); it is read once, which would freeze that randomness to one "
            "draw for every epoch: remove it and use quicktrain's per-epoch augmentation (--augment, --crop), or "
            "save the images under train/<class>/ and test/<class>/ and use --dataset imagefolder:PATH"
        )


def _random_by_name(transform: Any, depth: int = 0) -> str | None:
    if transform is None or depth > 4:
        return None
    name = type(transform).__name__
    if name.startswith("Random") or name in RANDOM_TRANSFORMS:
        return name
    for inner in getattr(transform, "transforms", None) or []:  # Compose and its kin
        found = _random_by_name(inner, depth + 1)
        if found:
            return found
    return None


def _random_by_reading(dataset: Any) -> str | None:
    import random

    import torch

    reads = []
    state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            for seed in range(_SEEDS):
                random.seed(seed)
                np.random.seed(seed)
                torch.manual_seed(seed)
                reads.append(_image(dataset[0][0], "dataset", 0))
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])
    if any(r.shape != reads[0].shape or not np.array_equal(r, reads[0]) for r in reads[1:]):
        return "its first item differs between reads under different seeds"
    return None


def _image(image: Any, what: str, index: int) -> np.ndarray:
    """One image as (H, W, 3) uint8."""
    if hasattr(image, "convert") and hasattr(image, "size"):  # PIL
        return np.asarray(image.convert("RGB"), dtype=np.uint8)
    array = image.detach().cpu().numpy() if hasattr(image, "detach") else np.asarray(image)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3:
        raise DataError(f"{what}[{index}] has shape {array.shape}; expected (C, H, W), (H, W, C) or (H, W)")
    if array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3):
        array = array.transpose(1, 2, 0)  # CHW (torch's layout) -> HWC
    if array.shape[-1] == 1:
        array = np.repeat(array, 3, axis=-1)
    if array.dtype == np.uint8:
        return array
    if np.issubdtype(array.dtype, np.floating):
        if array.min() < 0 or array.max() > 1:
            raise DataError(
                f"{what}[{index}] is a float image with values in [{array.min():.3g}, {array.max():.3g}]; give "
                "[0, 1] floats or uint8 (normalisation happens on the device)"
            )
        return np.rint(array * 255).astype(np.uint8)
    raise DataError(f"{what}[{index}] has dtype {array.dtype}; give uint8, float in [0, 1] or a PIL image")
