"""The bundled offline sample: 2,000 training and 500 test images of real CIFAR-10.

Stored as the original JPEG bytes (about 1 KB each, 2.4 MB in all) rather than decoded
pixels (7.7 MB), and decoded in well under a second. ``scripts/make_sample.py`` made it
from ../shared/datasets/cifar10-jpeg: 200 training and 50 test images per class.
"""

from __future__ import annotations

from functools import cache
from itertools import pairwise
from pathlib import Path

import numpy as np

from quicktrain.data.arrays import Arrays, Split
from quicktrain.data.decode import decode_image

SAMPLE_FILE = Path(__file__).with_name("sample_cifar10.npz")


@cache
def load_sample() -> Arrays:
    with np.load(SAMPLE_FILE) as z:
        classes = tuple(str(c) for c in z["classes"])
        splits = {}
        for part in ("train", "test"):
            blob, offsets = z[f"{part}_jpeg"], z[f"{part}_offsets"]
            images = np.stack([decode_image(blob[a:b].tobytes(), 32) for a, b in pairwise(offsets)])
            splits[part] = Split(images, z[f"{part}_labels"].astype(np.int64))
    return Arrays("sample", classes, splits["train"], splits["test"], source=str(SAMPLE_FILE))


def pack_jpegs(files: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate encoded images into one uint8 blob plus (N + 1) offsets."""
    offsets = np.cumsum([0] + [len(f) for f in files]).astype(np.int64)
    return np.frombuffer(b"".join(files), dtype=np.uint8), offsets
