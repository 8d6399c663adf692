"""The device-resident loader against the DataLoader path, loading and augmenting one epoch.

Both sides deliver the same augmented uint8 batches (tested identical) to the training
device, where a small reduction consumes them: the torch side through a DataLoader (pinned
memory and non_blocking copies on CUDA, ``--workers`` processes), the device side from one
uint8 tensor already there. Ratio = device / torch throughput.

    python benchmarks/device_loader.py --images 20000 --batch-size 512 --repeats 5

``--jitter B C`` adds a third side, the device loader with colour jitter (``data.brightness`` B,
``data.contrast`` C), and prints its cost: throughput with jitter / without.
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

from quicktrain.data.augment import AugmentSpec
from quicktrain.data.device_loader import DeviceLoader
from quicktrain.data.loader import make_loader
from quicktrain.data.synthetic import make_synthetic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=20000, help="32x32 training images per epoch")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers on the torch side")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jitter", type=float, nargs=2, metavar=("BRIGHTNESS", "CONTRAST"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pin = device.type == "cuda"
    split = make_synthetic(args.images, 10).train
    host = make_loader(split, args.batch_size, train=True, seed=0, workers=args.workers, pin=pin)
    resident = DeviceLoader(split, args.batch_size, seed=0, device=device)

    def consume(loader) -> int:
        total = torch.zeros((), device=device)
        for x, _ in loader:
            total += x.to(device, non_blocking=pin).float().mean()
        return len(split)

    sides = [Side("device", lambda: consume(resident), device), Side("torch", lambda: consume(host), device)]
    if args.jitter:
        spec = AugmentSpec(brightness=args.jitter[0], contrast=args.jitter[1])
        jittered = DeviceLoader(split, args.batch_size, seed=0, device=device, spec=spec)
        sides.append(Side("jitter", lambda: consume(jittered), device))
    results = compare(sides, repeats=args.repeats, warmup=1)
    r = ratios(results, "device", "torch")
    print(f"{device}: {args.images} images, batch {args.batch_size}, torch side pin={pin} workers={args.workers}")
    print(f"device loader {spread(results['device'])} img/s, DataLoader {spread(results['torch'])} img/s")
    print(f"ratio device / torch: {spread(r)}")
    out = {**results, "ratio": r, "ratio_median": statistics.median(r)}
    if args.jitter:
        cost = ratios(results, "jitter", "device")
        print(f"device loader with colour jitter {args.jitter}: {spread(results['jitter'])} img/s")
        print(f"ratio with jitter / without: {spread(cost)}")
        out |= {"jitter_ratio": cost, "jitter_ratio_median": statistics.median(cost)}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
