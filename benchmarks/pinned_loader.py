"""Pinned against pageable host memory for the DataLoader's host-to-GPU copies (CUDA only).

Both sides load the same uint8 batches with quicktrain's loader and copy them to the GPU, the
pinned side with ``pin_memory=True`` and ``non_blocking`` copies (what ``--pin-memory`` turns
on), the other with neither; a small reduction on the GPU consumes each batch. On a machine
without CUDA it prints why it is skipped and exits 0: pinning changes nothing on a CPU.

    python benchmarks/pinned_loader.py --batch-size 512 --images 20000 --repeats 5
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

from quicktrain.data.loader import make_loader
from quicktrain.data.synthetic import make_synthetic


def side(name: str, pin: bool, split, batch: int, workers: int, device: torch.device) -> Side:
    loader = make_loader(split, batch, train=True, seed=0, workers=workers, pin=pin)

    def run() -> int:
        total = torch.zeros((), device=device)
        for x, _ in loader:
            total += x.to(device, non_blocking=pin).float().mean()
        return len(split)

    return Side(name, run, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--images", type=int, default=20000, help="32x32 uint8 images per epoch")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("pinned_loader: skipped: no CUDA device here; pinned memory only speeds host-to-GPU copies")
        return
    device = torch.device("cuda")
    split = make_synthetic(args.images, 10).train
    sides = [
        side("pinned", True, split, args.batch_size, args.workers, device),
        side("pageable", False, split, args.batch_size, args.workers, device),
    ]
    results = compare(sides, repeats=args.repeats, warmup=1)
    r = ratios(results, "pinned", "pageable")
    print(f"pinned {spread(results['pinned'])} img/s, pageable {spread(results['pageable'])} img/s, ratio {spread(r)}")
    if args.json:
        args.json.write_text(json.dumps({**results, "ratio": r, "ratio_median": statistics.median(r)}, indent=2))


if __name__ == "__main__":
    main()
