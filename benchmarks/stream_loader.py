"""Streaming an image folder (each batch decoded from its JPEG/PNG files in the loader's
workers) against the in-memory path (decoded once, cached), loading and augmenting the same
batches of a real folder.

Both sides yield identical batches (tests/test_stream.py); the question is what streaming
costs in throughput, so that a user can size ``--workers`` for a folder bigger than memory.
Ratio = stream / memory images per second, per interleaved trial pair.

    python benchmarks/stream_loader.py --folder ../shared/datasets/cifar10-jpeg --images 5000 --workers 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Side, compare, ratios, spread

from quicktrain.config import DataConfig
from quicktrain.data.loader import make_loader
from quicktrain.data.sources import load_arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", default="../shared/datasets/cifar10-jpeg", help="imagefolder with train/ and test/")
    parser.add_argument("--images", type=int, default=5000, help="class-balanced training images per pass")
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=1, help="loader workers on both sides")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    splits = {}
    for mode in ("memory", "stream"):
        cfg = DataConfig(
            dataset=f"imagefolder:{args.folder}", resolution=args.resolution, max_train_samples=args.images,
            data_mode=mode, load_test=False,
        )  # fmt: skip
        splits[mode] = load_arrays(cfg, progress=False).train
    device = torch.device("cpu")

    def one_pass(mode: str):
        loader = make_loader(splits[mode], args.batch_size, train=True, seed=0, workers=args.workers)
        return lambda: sum(len(y) for _, y in loader)

    sides = [Side(mode, one_pass(mode), device) for mode in ("memory", "stream")]
    results = compare(sides, repeats=args.repeats, warmup=1)
    r = ratios(results, "stream", "memory")
    print(
        f"{args.folder}: {args.images} images at {args.resolution} px, batch {args.batch_size}, {args.workers} workers"
    )
    print(f"in memory {spread(results['memory'])} img/s, streamed {spread(results['stream'])} img/s")
    print(f"ratio stream / memory: {spread(r)}")
    if args.json:
        args.json.write_text(json.dumps({**results, "ratio": r, "ratio_median": statistics.median(r)}, indent=2))


if __name__ == "__main__":
    main()
