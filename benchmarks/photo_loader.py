"""Training epochs on photos: quicktrain's photo pipeline against the one a torchvision user writes.

Both sides train the same small, data-bound network (one 16x16 patch convolution, pooling and a
linear head: its step alone is many times faster than either pipeline, so the epoch time is the
input pipeline's) for whole epochs at 128 and 224 px, with the same number of DataLoader workers:

- quicktrain: ``--dataset imagefolder:PATH`` as a run loads it: the photo store (built once, in
  parallel, before the timing; its build time is printed), RandomResizedCrop + flip per
  (seed, epoch, index), uint8 batches normalised on the device into kept buffers (written in
  bf16 with ``--amp bf16``: what the first layer's autocast would cast them to);
- torchvision: ``ImageFolder`` (Pillow decoding of every file every epoch) with
  ``v2.RandomResizedCrop``, ``v2.RandomHorizontalFlip``, ``ToImage``, ``ToDtype``, ``Normalize``;
  a ``DataLoader`` with shuffling, persistent workers (as quicktrain's) and pinned memory on CUDA.

Epochs are interleaved (A B B A ...), one untimed warm-up epoch each, per seed; the ratio of
images/s is reported per epoch pair (median and spread). After the same epochs both models are
evaluated on the held-out split with their own evaluation transform (resize the shorter side to
size / 0.875, centre crop), so the two pipelines must also train equally well.

Without ``--folder``, a photo-like folder is built from the CIFAR-10 JPEG copy: each image
upscaled (bicubic) to a random size with sides of 256-512 px and a random aspect ratio, saved as
JPEG (quality 90).

    python benchmarks/photo_loader.py --cifar ../shared/datasets/cifar10-jpeg --build photo-bench \\
        --train-per-class 200 --test-per-class 50 --workers 2 --epochs 3 --seeds 3 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import spread
from patchnet import PatchNet

from quicktrain.config import DataConfig
from quicktrain.data.augment import AugmentSpec
from quicktrain.data.loader import make_loader, set_epoch
from quicktrain.data.prepare import InputPipeline
from quicktrain.data.sources import load_arrays

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # both sides normalise alike


def build_folder(cifar: Path, out: Path, train_per_class: int, test_per_class: int, seed: int = 0) -> Path:
    """Photo-like copies of CIFAR-10 JPEGs: 256-512 px sides, random aspect ratios (one process per class)."""
    marker = out / f".built-{train_per_class}-{test_per_class}-{seed}"
    if marker.is_file():
        return out
    jobs = [
        (class_dir, out / split / class_dir.name, per_class, seed + 1000 * k + i)
        for k, (split, per_class) in enumerate((("train", train_per_class), ("test", test_per_class)))
        for i, class_dir in enumerate(sorted((cifar / split).iterdir()))
    ]
    with ProcessPoolExecutor(min(len(jobs), os.cpu_count() or 1)) as pool:
        list(pool.map(_upscale_class, jobs))
    marker.touch()
    return out


def _upscale_class(job: tuple[Path, Path, int, int]) -> None:
    source, target, count, seed = job
    rng = np.random.default_rng(seed)
    target.mkdir(parents=True, exist_ok=True)
    for src in sorted(source.iterdir())[:count]:
        w, h = (int(v) for v in rng.integers(256, 513, 2))
        with Image.open(src) as img:
            img.convert("RGB").resize((w, h), Image.BICUBIC).save(target / f"{src.stem}.jpg", quality=90)


NETWORK, AMP, STORE = "patch", "off", "raw"  # set from --network, --amp, --store-format: every arm alike


def make_network(classes: int) -> nn.Module:
    if NETWORK == "patch":
        return PatchNet(classes)
    from torchvision.models import resnet50

    return resnet50(num_classes=classes)  # the GPU check: does resnet50 at 224 px ever wait for data?


class Arm:
    """One pipeline with its own model and optimizer: ``epoch()`` trains one epoch, returns images/s."""

    def __init__(self, name: str, classes: int, seed: int, device: torch.device) -> None:
        torch.manual_seed(seed)
        self.name, self.device, self.epochs = name, device, 0
        layout = torch.channels_last if NETWORK == "resnet50" else torch.contiguous_format
        self.model = make_network(classes).to(device, memory_format=layout)
        self.autocast = torch.autocast(device.type, torch.bfloat16, enabled=AMP == "bf16")
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=2e-3, weight_decay=0.01)

    def batches(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def epoch(self) -> float:
        start, seen = time.perf_counter(), 0
        self.model.train()
        for x, y in self.batches():
            with self.autocast:
                loss = nn.functional.cross_entropy(self.model(x), y)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            seen += len(y)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.epochs += 1
        return seen / (time.perf_counter() - start)

    @torch.no_grad()
    def accuracy(self) -> float:
        self.model.eval()
        right = total = 0
        for x, y in self.test_batches():
            with self.autocast:
                right += int((self.model(x).argmax(1) == y).sum())
            total += len(y)
        return right / total


class Quicktrain(Arm):
    def __init__(
        self, folder: Path, size: int, batch: int, workers: int, seed: int, device: torch.device, cache: str
    ) -> None:
        start = time.perf_counter()
        data = DataConfig(
            dataset=f"imagefolder:{folder}", resolution=size, workers=workers, cache_dir=cache, store_format=STORE
        )
        self.arrays = load_arrays(data, progress=False)
        self.prepare_s = time.perf_counter() - start  # the store's build the first time, then its opening
        super().__init__("quicktrain", self.arrays.num_classes, seed, device)
        pin = device.type == "cuda"
        self.loader = make_loader(self.arrays.train, batch, True, seed, workers, pin, spec=AugmentSpec(crop="resized"))
        self.test_loader = make_loader(self.arrays.test, batch, False, seed, workers, pin)
        dtype = torch.bfloat16 if AMP == "bf16" else torch.float32  # the dtype autocast's first layer takes
        self.inputs = InputPipeline(device, non_blocking=pin, mean=MEAN, std=STD, dtype=dtype)

    def batches(self):
        set_epoch(self.loader, self.epochs)
        for x, y in self.loader:
            yield self.inputs(x.to(self.device, non_blocking=True)), y.to(self.device, non_blocking=True)

    def test_batches(self):
        for x, y in self.test_loader:
            yield self.inputs(x.to(self.device)), y.to(self.device)


class Torchvision(Arm):
    def __init__(self, folder: Path, size: int, batch: int, workers: int, seed: int, device: torch.device) -> None:
        from torchvision.datasets import ImageFolder
        from torchvision.transforms import v2

        tail = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
        train = v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(), *tail])
        test = v2.Compose([v2.Resize(math.floor(size / 0.875), antialias=True), v2.CenterCrop(size), *tail])
        train_set, test_set = ImageFolder(folder / "train", train), ImageFolder(folder / "test", test)
        super().__init__("torchvision", len(train_set.classes), seed, device)
        pin = device.type == "cuda"
        g = torch.Generator().manual_seed(seed)
        persistent = workers > 0  # as quicktrain's loader: workers started once, not per epoch
        self.loader = torch.utils.data.DataLoader(
            train_set, batch, shuffle=True, num_workers=workers, pin_memory=pin, generator=g,
            persistent_workers=persistent,
        )  # fmt: skip
        self.test_loader = torch.utils.data.DataLoader(test_set, batch, num_workers=workers, pin_memory=pin)

    def batches(self):
        for x, y in self.loader:
            yield x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def test_batches(self):
        for x, y in self.test_loader:
            yield x.to(self.device), y.to(self.device)


def model_only(size: int, batch: int, device: torch.device, steps: int = 20) -> float:
    """Images/s of the network's training step alone, on one batch already on the device."""
    arm = Arm("model", 10, 0, device)
    x, y = torch.randn(batch, 3, size, size, device=device), torch.randint(0, 10, (batch,), device=device)
    arm.batches = lambda: [(x, y)] * steps  # type: ignore[method-assign]
    arm.epoch()  # warm-up
    return arm.epoch()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, help="a photo folder (train/<class>/*, test/<class>/*) to use as is")
    parser.add_argument("--cifar", type=Path, default=Path("../shared/datasets/cifar10-jpeg"))
    parser.add_argument("--build", type=Path, default=Path("photo-bench"), help="where the built folder goes")
    parser.add_argument("--train-per-class", type=int, default=200)
    parser.add_argument("--test-per-class", type=int, default=50)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 224])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per side and seed (after one warm-up)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--network", choices=["patch", "resnet50"], default="patch")
    parser.add_argument("--amp", choices=["off", "bf16"], default="off")
    parser.add_argument(
        "--arms", nargs="+", choices=["quicktrain", "torchvision"], default=["quicktrain", "torchvision"]
    )
    parser.add_argument(
        "--cpu-allocator", choices=["system", "retain"], default="system",
        help="glibc's allocator for the whole process, both arms alike (quicktrain's --cpu-allocator; default system)",
    )  # fmt: skip
    parser.add_argument(
        "--store-format", choices=["raw", "jpeg", "auto"], default="raw",
        help="quicktrain's photo store: raw pixels (the default here, as before store formats existed), jpeg, auto",
    )  # fmt: skip
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.cpu_allocator == "retain":
        from quicktrain.techniques.cpu.allocator import HostAllocator

        HostAllocator("retain", True).apply()
    global NETWORK, AMP, STORE
    NETWORK, AMP, STORE = args.network, args.amp, args.store_format
    device = torch.device(args.device)
    folder = args.folder or build_folder(args.cifar, args.build, args.train_per_class, args.test_per_class)
    print(f"photo_loader: {folder}, {args.workers} workers, batch {args.batch_size}, {device}, "
          f"{args.network} network, amp {args.amp}, {args.cpu_allocator} allocator, {STORE} store, "
          f"torch {torch.__version__}, {os.cpu_count()} CPUs")  # fmt: skip
    cache = tempfile.mkdtemp(prefix="photo-store-")  # a fresh store: its build time is measured
    report = {"folder": str(folder), "workers": args.workers, "batch_size": args.batch_size,
              "cpu_allocator": args.cpu_allocator, "network": args.network, "amp": args.amp, "sizes": {}}  # fmt: skip
    for size in args.sizes:
        rates: dict[str, list[float]] = {name: [] for name in args.arms}
        accuracy: dict[str, list[float]] = {name: [] for name in args.arms}
        pairs, prepare = [], []
        for seed in range(args.seeds):
            arms = []
            if "quicktrain" in args.arms:
                arms.append(Quicktrain(folder, size, args.batch_size, args.workers, seed, device, cache))
                prepare.append(arms[-1].prepare_s)
            if "torchvision" in args.arms:
                arms.append(Torchvision(folder, size, args.batch_size, args.workers, seed, device))
            for arm in arms:
                arm.epoch()  # warm-up: page cache, worker start, allocator
            for epoch in range(args.epochs):
                got = {arm.name: arm.epoch() for arm in (arms if epoch % 2 == 0 else arms[::-1])}
                for name, value in got.items():
                    rates[name].append(value)
                if len(got) == 2:
                    pairs.append(got["quicktrain"] / got["torchvision"])
            for arm in arms:
                accuracy[arm.name].append(arm.accuracy())
        alone = model_only(size, args.batch_size, device)
        print(f"\n{size} px: images/s of whole training epochs ({args.seeds} seeds x {args.epochs} epochs)")
        for name in rates:
            print(f"  {name:<12} {spread(rates[name])} img/s, test accuracy {spread(accuracy[name])}")
        if pairs:
            print(f"  ratio        quicktrain / torchvision: {spread(pairs, 'x')} (per epoch pair)")
        print(f"  model alone  {alone:.4g} img/s (the network's step on a batch already on the device)")
        if prepare:
            opened = f", then {statistics.median(prepare[1:]):.2f} s to open" if len(prepare) > 1 else ""
            images = len(arms[0].arrays.train) + len(arms[0].arrays.test)
            print(f"  store        {prepare[0]:.1f} s to build once ({images} images, "
                  f"{args.workers or os.cpu_count()} processes){opened}")  # fmt: skip
            if "quicktrain" in rates:
                share = statistics.median(rates["quicktrain"]) / alone
                print(f"  vs model     quicktrain's epochs run at {share:.0%} of the model's step alone (on a GPU: the "
                      "rest is waiting for data; on a CPU the loader's work shares the cores)")  # fmt: skip
        report["sizes"][str(size)] = {
            "images_per_s": rates, "ratio": pairs, "accuracy": accuracy, "model_alone_images_per_s": alone,
            "store_build_s": prepare[0], "store_open_s": prepare[1:],
        }  # fmt: skip
    shutil.rmtree(cache, ignore_errors=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
