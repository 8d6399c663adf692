"""What the GPU suite carries to a machine with no network, and its unpacking there.

    python benchmarks/gpu_carry.py pack [--data ../shared/datasets/cifar10-jpeg]   # here, once
    python benchmarks/gpu_carry.py unpack --to /tmp/cifar10-jpeg                    # on the GPU machine
    python benchmarks/gpu_carry.py size                                             # what would travel

``pack`` writes ``.gpu-carry/`` (git-ignored): the wheels the GPU image lacks (pytorch-ignite,
and airbench for benchmarks/vs_airbench.py; pure Python, built here from the package index),
and the CIFAR-10 JPEG copy as one file, ``cifar10-jpeg.npz``: every file's original bytes
concatenated per split, with offsets, labels and class names (60,000 small files would cost a
tar header each; packed, it is the 55 MB of JPEG bytes). ``unpack`` writes the same files back
into the ``train/<class>/``, ``test/<class>/`` layout, byte for byte.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CARRY = REPO / ".gpu-carry"
LIMIT = 64 * 2**20  # the device tool's limit on everything carried
WHEELS = ["pytorch-ignite>=0.5", "airbench==0.1.8"]


def pack(data: Path) -> None:
    wheels = CARRY / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), *WHEELS], check=True)
    arrays: dict[str, np.ndarray] = {}
    classes = sorted(d.name for d in (data / "train").iterdir() if d.is_dir())
    for split in ("train", "test"):
        blobs, labels, names = [], [], []
        for label, name in enumerate(classes):
            for path in sorted((data / split / name).iterdir()):
                blobs.append(np.frombuffer(path.read_bytes(), dtype=np.uint8))
                labels.append(label)
                names.append(path.name)
        arrays[f"{split}_bytes"] = np.concatenate(blobs)
        arrays[f"{split}_offsets"] = np.cumsum([0, *map(len, blobs)])
        arrays[f"{split}_labels"] = np.asarray(labels, dtype=np.int16)
        arrays[f"{split}_names"] = np.asarray(names)
    np.savez(CARRY / "cifar10-jpeg.npz", classes=np.asarray(classes), **arrays)
    print(f"packed into {CARRY}: {size() / 2**20:.1f} MiB to carry with the working tree")


def unpack(to: Path) -> None:
    with np.load(CARRY / "cifar10-jpeg.npz") as packed:
        classes = [str(c) for c in packed["classes"]]
        for split in ("train", "test"):
            data, offsets = packed[f"{split}_bytes"], packed[f"{split}_offsets"]
            for i, (label, name) in enumerate(zip(packed[f"{split}_labels"], packed[f"{split}_names"])):
                folder = to / split / classes[int(label)]
                folder.mkdir(parents=True, exist_ok=True)
                (folder / str(name)).write_bytes(data[offsets[i] : offsets[i + 1]].tobytes())
    print(f"unpacked to {to}")


def size() -> int:
    """Bytes that travel: the carry folder plus the tracked working tree."""
    carried = sum(p.stat().st_size for p in CARRY.rglob("*") if p.is_file()) if CARRY.is_dir() else 0
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    tree = sum(
        (REPO / name).stat().st_size for name in tracked.decode().split("\0") if name and (REPO / name).is_file()
    )
    return carried + tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "datasets" / "cifar10-jpeg")
    u = sub.add_parser("unpack")
    u.add_argument("--to", type=Path, required=True)
    sub.add_parser("size")
    args = parser.parse_args()
    if args.command == "pack":
        pack(args.data)
    elif args.command == "unpack":
        unpack(args.to)
    else:
        total = size()
        print(f"{total / 2**20:.1f} MiB would travel (limit {LIMIT / 2**20:.0f} MiB)")
        sys.exit(0 if total <= LIMIT else 1)


if __name__ == "__main__":
    main()
