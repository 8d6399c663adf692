"""A photo library at scale: listing, store builds, start-up, loaders, memory of 2 ranks, data wait.

    python benchmarks/scale_photos.py FOLDER --out OUT [--size 224] [--workers 2] [--steps ...]

FOLDER is a photo folder (``train/<class>/*.jpg``, ``test/<class>/*.jpg``; ``make_photo_folder.py``
writes one of 100,000 photo-like JPEGs). Each step writes ``OUT/<step>.json`` and prints its lines;
``OUT/cache`` holds the stores (delete it after), ``OUT/runs`` the run records.

- ``listing``: seconds to list the training and test folders and to key the store (a stat per file).
- ``build``: each store format built from scratch with ``--workers`` processes: seconds, images/s
  (and per process), its bytes against the source files' bytes.
- ``startup``: seconds from the command to the end of a one-update run with the store already built
  (``quicktrain train --max-time 0.01``; the second of two runs; includes a 64-image evaluation
  and writing the record, so it bounds the time to the first step from above), on 16,000 training
  images and on all of them (jpeg), and on all (raw).
- ``loaders``: images/s of a data-bound training step (``patchnet.py``) fed by quicktrain's loader
  on each store and by torchvision's ``ImageFolder`` + ``RandomResizedCrop`` pipeline, ``--workers``
  loader processes each, ``--images`` images per trial, trials interleaved (the order rotates),
  one warm-up trial each; the ratio to torchvision per trial round (median [min-max]).
- ``ddp``: ``torchrun --nproc-per-node 2`` trains the data-bound net on the store for ``--ddp-time``
  seconds, on a 10,000-image subset and on the whole folder; each rank's peak anonymous and
  file-backed resident memory (``/proc/PID/status``, polled), to show the store is shared through the
  page cache and anonymous memory does not grow with the dataset.
- ``wait``: ``data_wait_fraction`` of a quicktrain run of the data-bound net and of a compute-bound
  one (resnet18) on the same store, ``--wait-time`` seconds each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from harness import spread  # noqa: E402
from patchnet import PatchNet  # noqa: E402

from quicktrain.data.arrays import Split  # noqa: E402
from quicktrain.data.augment import AugmentSpec  # noqa: E402
from quicktrain.data.imagefolder import PhotoOptions, list_split  # noqa: E402
from quicktrain.data.loader import make_loader, set_epoch  # noqa: E402
from quicktrain.data.photo_store import DATA_FILE, open_store, store_key  # noqa: E402
from quicktrain.data.prepare import InputPipeline  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def step_listing(folder: Path, side: int) -> dict:
    start = time.perf_counter()
    train = list_split(folder, "train")
    test = list_split(folder, "test")
    listed = time.perf_counter() - start
    start = time.perf_counter()
    store_key(train.paths, side, "jpeg")
    keyed = time.perf_counter() - start
    source = sum(p.stat().st_size for p in train.paths)
    print(f"listing: {len(train.paths)} + {len(test.paths)} files listed in {listed:.1f} s, keyed in {keyed:.1f} s; "
          f"training files {gib(source)} ({source / len(train.paths) / 1024:.0f} KB each)")  # fmt: skip
    return {"train_files": len(train.paths), "test_files": len(test.paths), "list_s": listed, "key_s": keyed,
            "source_bytes": source}  # fmt: skip


def step_build(folder: Path, side: int, size: int, workers: int, cache: Path) -> dict:
    train = list_split(folder, "train")
    source = sum(p.stat().st_size for p in train.paths)
    out = {}
    for fmt in ("jpeg", "raw"):
        where = cache / fmt
        shutil.rmtree(where, ignore_errors=True)
        start = time.perf_counter()
        store = open_store(train.paths, side, size, 0.875, str(where), workers, True, 0, fmt)
        seconds = time.perf_counter() - start
        nbytes = (store.folder / DATA_FILE[fmt]).stat().st_size
        rate = len(train.paths) / seconds
        print(f"build {fmt}: {seconds:.0f} s, {rate:.0f} images/s ({rate / workers:.0f} per process, {workers} "
              f"processes), {gib(nbytes)} = {nbytes / source:.2f}x the source files ({gib(source)})")  # fmt: skip
        out[fmt] = {"seconds": seconds, "images_per_s": rate, "workers": workers, "bytes": nbytes,
                    "source_bytes": source, "ratio_to_source": nbytes / source}  # fmt: skip
    return out


def _train_argv(folder: Path, size: int, fmt: str, cache: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--dataset", f"imagefolder:{folder}", "--resolution", str(size), "--store-format", fmt,
        "--cache-dir", str(cache / fmt), "--model", str(HERE / "patchnet.py") + ":make", "--batch-size", "64",
        "--no-progress", "--no-tensorboard", "--out", str(out), *extra,
    ]  # fmt: skip


def step_startup(folder: Path, size: int, cache: Path, runs: Path) -> dict:
    out = {}
    for fmt, subset in (("jpeg", 16000), ("jpeg", None), ("raw", None)):
        label = f"{fmt}-{subset or 'all'}"
        times = []
        for attempt in range(2):  # the first builds the store (the subset's, and the small test split's)
            limits = ["--max-time", "0.01", "--max-test-samples", "64", "--epochs", "1"]
            limits += ["--max-train-samples", str(subset)] if subset else []
            argv = _train_argv(folder, size, fmt, cache, runs / f"startup-{label}-{attempt}", *limits)
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "quicktrain", "train", *argv], check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        print(f"startup {label}: {times[1]:.1f} s from the command to a finished one-update run, store built "
              f"(first run, building what was missing: {times[0]:.1f} s)")  # fmt: skip
        out[label] = {"seconds": times[1], "first_seconds": times[0], "train_images": subset or "all"}
    return out


class Trial:
    """One pipeline feeding the data-bound step: ``run(images)`` trains on that many, returns images/s."""

    def __init__(self, name: str, loader, normalise) -> None:
        self.name, self.loader, self.normalise = name, loader, normalise
        torch.manual_seed(0)
        self.model = PatchNet(10)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.epoch, self.iterator = 0, None

    def _next(self):
        while True:
            if self.iterator is None:
                if self.name != "torchvision":
                    set_epoch(self.loader, self.epoch)  # quicktrain's crops: per (seed, epoch, index)
                self.iterator = iter(self.loader)
            try:
                return next(self.iterator)
            except StopIteration:
                self.iterator, self.epoch = None, self.epoch + 1

    def run(self, images: int) -> float:
        start, seen = time.perf_counter(), 0
        while seen < images:
            x, y = self._next()
            loss = nn.functional.cross_entropy(self.model(self.normalise(x)), y)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            seen += len(y)
        return seen / (time.perf_counter() - start)


def step_loaders(folder: Path, size: int, workers: int, cache: Path, images: int, repeats: int) -> dict:
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2

    side = PhotoOptions().store_side(size)
    train = list_split(folder, "train")
    inputs = InputPipeline(torch.device("cpu"), mean=MEAN, std=STD)
    trials = []
    for fmt in ("raw", "jpeg"):
        store = open_store(train.paths, side, size, 0.875, str(cache / fmt), workers, False, 0, fmt)
        loader = make_loader(Split(store, train.labels), 64, True, 0, workers, spec=AugmentSpec(crop="resized"))
        trials.append(Trial(f"quicktrain-{fmt}", loader, inputs))
    tail = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
    dataset = ImageFolder(folder / "train", v2.Compose([v2.RandomResizedCrop(size, antialias=True),
                                                        v2.RandomHorizontalFlip(), *tail]))  # fmt: skip
    tv = torch.utils.data.DataLoader(dataset, 64, shuffle=True, num_workers=workers, persistent_workers=workers > 0,
                                     generator=torch.Generator().manual_seed(0))  # fmt: skip
    trials.append(Trial("torchvision", tv, lambda x: x))
    for trial in trials:
        trial.run(images // 4)  # warm-up: workers, page cache, allocator
    rates: dict[str, list[float]] = {t.name: [] for t in trials}
    for r in range(repeats):
        for trial in trials[r % 3 :] + trials[: r % 3]:
            rates[trial.name].append(trial.run(images))
    out = {"images_per_trial": images, "workers": workers, "rates": rates}
    print(f"loaders at {size} px, {workers} workers, {images} images a trial, {repeats} trials each:")
    for name, values in rates.items():
        ratio = [v / t for v, t in zip(values, rates["torchvision"])]
        out[f"{name}_ratio"] = ratio
        print(f"  {name:<16} {spread(values)} img/s   {spread(ratio, 'x')} torchvision's")
    return out


def _rss(pid: int) -> tuple[int, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    kb = lambda k: int(fields.get(k, "0 kB").split()[0]) * 1024  # noqa: E731
    return kb("RssAnon"), kb("RssFile") + kb("RssShmem")


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def step_ddp(folder: Path, size: int, cache: Path, runs: Path, seconds: float, workers: int) -> dict:
    out = {}
    for label, extra in (("10k", ["--max-train-samples", "10000"]), ("all", [])):
        limits = ["--max-time", str(seconds), "--max-test-samples", "500", "--epochs", "50"]
        argv = _train_argv(folder, size, "jpeg", cache, runs / f"ddp-{label}", *limits, "--workers", str(workers),
                           *extra)  # fmt: skip
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "quicktrain", "train"]
        proc = subprocess.Popen([*cmd, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        peak: dict[int, tuple[int, int]] = {}
        while proc.poll() is None:
            for rank_pid in _children(proc.pid):
                try:
                    anon, file = _rss(rank_pid)
                except OSError:
                    continue
                old = peak.get(rank_pid, (0, 0))
                peak[rank_pid] = (max(old[0], anon), max(old[1], file))
            time.sleep(0.5)
        log = proc.stdout.read()
        if proc.returncode != 0:
            print(log[-2000:])
            raise SystemExit(f"torchrun failed ({proc.returncode})")
        summary = json.loads((runs / f"ddp-{label}" / "summary.json").read_text())
        ranks = [{"anon_bytes": a, "file_bytes": f} for a, f in peak.values()]
        print(f"ddp {label}: {summary['train_samples']} training images, world {summary['world_size']}, "
              f"{summary['images_per_s']:.0f} img/s; peak resident per rank: "
              + ", ".join(f"anon {gib(r['anon_bytes'])} + file {gib(r['file_bytes'])}" for r in ranks))  # fmt: skip
        out[label] = {
            "ranks": ranks, "train_samples": summary["train_samples"], "world": summary["world_size"],
            "images_per_s": summary["images_per_s"], "data_wait_fraction": summary["data_wait_fraction"],
        }  # fmt: skip
    return out


def step_wait(folder: Path, size: int, cache: Path, runs: Path, seconds: float, workers: int) -> dict:
    out = {}
    for label, model in (("data-bound", str(HERE / "patchnet.py") + ":make"), ("compute-bound", "resnet18")):
        argv = _train_argv(folder, size, "jpeg", cache, runs / f"wait-{label}", "--max-time", str(seconds),
                           "--max-test-samples", "500", "--epochs", "50", "--workers", str(workers))  # fmt: skip
        argv[argv.index("--model") + 1] = model
        proc = subprocess.run([sys.executable, "-m", "quicktrain", "train", *argv], capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout[-1500:], proc.stderr[-1500:])
            raise SystemExit("train failed")
        summary = json.loads((runs / f"wait-{label}" / "summary.json").read_text())
        advice = [line for line in proc.stdout.splitlines() if line.startswith("input-bound")]
        print(f"wait {label} ({model.rsplit('/', 1)[-1]}): data_wait_fraction {summary['data_wait_fraction']:.2f}, "
              f"{summary['images_per_s']:.0f} img/s; advice shown: {bool(advice)}")  # fmt: skip
        out[label] = {"model": model.rsplit("/", 1)[-1], "data_wait_fraction": summary["data_wait_fraction"],
                      "images_per_s": summary["images_per_s"], "advice": advice}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--images", type=int, default=3200, help="loaders: images per trial")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ddp-time", type=float, default=60.0)
    parser.add_argument("--wait-time", type=float, default=60.0)
    steps = ("listing", "build", "startup", "loaders", "ddp", "wait")
    parser.add_argument("--steps", nargs="+", choices=steps, default=list(steps))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    cache, runs = args.out / "cache", args.out / "runs"
    side = PhotoOptions().store_side(args.size)
    print(f"scale_photos: {args.folder}, {args.size} px (store side {side}), {args.workers} workers, "
          f"torch {torch.__version__}, {os.cpu_count()} CPUs")  # fmt: skip
    for step in args.steps:
        if step == "listing":
            result = step_listing(args.folder, side)
        elif step == "build":
            result = step_build(args.folder, side, args.size, args.workers, cache)
        elif step == "startup":
            result = step_startup(args.folder, args.size, cache, runs)
        elif step == "loaders":
            result = step_loaders(args.folder, args.size, args.workers, cache, args.images, args.repeats)
        elif step == "ddp":
            result = step_ddp(args.folder, args.size, cache, runs, args.ddp_time, args.workers)
        else:
            result = step_wait(args.folder, args.size, cache, runs, args.wait_time, args.workers)
        (args.out / f"{step}.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
