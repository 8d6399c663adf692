"""Rebuild quicktrain/data/sample_cifar10.npz from the CIFAR-10 JPEG copy.

    python scripts/make_sample.py ../shared/datasets/cifar10-jpeg

Takes 200 training and 50 test images per class (a fixed, seeded choice) and stores their
original JPEG bytes, so the sample is real CIFAR-10 pixels with no second lossy encoding.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from quicktrain.data.arrays import balanced_subset
from quicktrain.data.imagefolder import list_split
from quicktrain.data.sample import SAMPLE_FILE, pack_jpegs

PER_CLASS = {"train": 200, "test": 50}


def main(root: str) -> None:
    arrays = {}
    for part, per_class in PER_CLASS.items():
        classes, paths, labels = list_split(Path(root), part)
        keep = balanced_subset(labels, per_class * len(classes), seed=0)
        blob, offsets = pack_jpegs([paths[i].read_bytes() for i in keep])
        arrays.update({f"{part}_jpeg": blob, f"{part}_offsets": offsets, f"{part}_labels": labels[keep]})
    arrays["classes"] = np.array(classes)
    np.savez(SAMPLE_FILE, **arrays)
    print(f"wrote {SAMPLE_FILE} ({SAMPLE_FILE.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/datasets/cifar10-jpeg")
