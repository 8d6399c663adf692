"""Generated images for tests and benchmarks: learnable, deterministic, no files needed.

Each class has its own coarse colour pattern, mirror-symmetric so that flips keep the class
recognisable; samples are that pattern plus heavy pixel noise. A tiny model learns them
within a few epochs, while one step does not solve them.
"""

from __future__ import annotations

import numpy as np

from quicktrain.data.arrays import Arrays, Split


def make_synthetic(
    num_train: int = 512, num_test: int = 128, num_classes: int = 10, size: int = 32, seed: int = 0
) -> Arrays:
    rng = np.random.default_rng(seed)
    # (C, 4, 4, 3) coarse patterns, upsampled to (C, size, size, 3)
    half = rng.uniform(40, 215, size=(num_classes, 4, 2, 3))
    coarse = np.concatenate([half, half[:, :, ::-1]], axis=2)  # (C, 4, 4, 3), left-right mirrored
    patterns = coarse.repeat(size // 4, axis=1).repeat(size // 4, axis=2)

    def split(n: int) -> Split:
        labels = np.arange(n, dtype=np.int64) % num_classes  # balanced
        rng.shuffle(labels)
        noise = rng.normal(0, 40, size=(n, size, size, 3))
        images = np.clip(patterns[labels] + noise, 0, 255).astype(np.uint8)
        return Split(images, labels)

    classes = tuple(f"class{c}" for c in range(num_classes))
    return Arrays("synthetic", classes, split(num_train), split(num_test), source=f"generated(seed={seed})")
