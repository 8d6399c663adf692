"""Write a photo-like image folder for the scale benchmarks: JPEGs of 300-500 px that weigh what
phone photos do at that size (~60-100 KB), with a class that shows only in the picture's content.

    python benchmarks/make_photo_folder.py OUT --train 100000 --test 5000 [--classes 10] [--workers 2]

Each image is a random crop of a textured background (smoothed noise at several scales, so the
JPEG encoder has real detail to keep, not flat colour) in a random palette, with per-pixel sensor
noise, and a class motif: a grating whose orientation and frequency depend on the class, blended
into a random region. Sizes and aspect ratios vary (300-500 px a side; landscape and portrait),
quality 85-95, some progressive. Files are ``OUT/{train,test}/class<k>/<i>.jpg``; the folder is
made deterministically from ``--seed`` (each image from its own seed), in ``--workers`` processes,
and written to ``OUT.tmp`` first, then renamed (a stopped run leaves no half folder).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

BANK = 24  # background textures, each 640 x 640, made once per process
_TEXTURES: list[np.ndarray] = []


def _smooth_noise(rng: np.random.Generator, side: int) -> np.ndarray:
    """Noise at scales 1, 1/4, 1/16 and 1/64 of the side, summed: detail at every frequency."""
    out = np.zeros((side, side), dtype=np.float32)
    for scale, weight in ((1, 0.35), (4, 0.3), (16, 0.2), (64, 0.15)):
        small = rng.standard_normal((side // scale + 1, side // scale + 1)).astype(np.float32)
        out += weight * np.kron(small, np.ones((scale, scale), np.float32))[:side, :side]
    return out


def _textures() -> list[np.ndarray]:
    if not _TEXTURES:
        rng = np.random.default_rng(12345)
        for _ in range(BANK):
            channels = [_smooth_noise(rng, 640) for _ in range(3)]
            _TEXTURES.append(np.stack(channels, axis=-1))
    return _TEXTURES


def make_image(seed: int, label: int, classes: int) -> tuple[Image.Image, int, bool]:
    """One photo-like image of class ``label``, its JPEG quality and whether progressive."""
    rng = np.random.default_rng(seed)
    w, h = (int(v) for v in rng.integers(300, 501, 2))
    texture = _textures()[int(rng.integers(BANK))]
    y0, x0 = int(rng.integers(0, 640 - h + 1)), int(rng.integers(0, 640 - w + 1))
    base = texture[y0 : y0 + h, x0 : x0 + w]
    palette = rng.uniform(60, 190, 3).astype(np.float32)
    contrast = rng.uniform(35, 70, 3).astype(np.float32)
    img = palette + contrast * base
    # the class motif: a grating of the class's orientation and frequency in a random region
    angle = np.pi * label / classes
    freq = 0.06 + 0.03 * (label % 3)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    grating = np.sin(freq * (xx * np.cos(angle) + yy * np.sin(angle)) * 2 * np.pi)
    cy, cx = rng.uniform(0.3, 0.7) * h, rng.uniform(0.3, 0.7) * w
    radius = rng.uniform(0.25, 0.45) * min(h, w)
    mask = np.exp(-(((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * radius**2)))
    img += (45 * grating * mask)[..., None]
    img += rng.normal(0, 6, img.shape).astype(np.float32)  # sensor noise
    pixels = np.clip(img, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels), int(rng.integers(85, 96)), bool(rng.random() < 0.2)


def _write(job: tuple[str, list[tuple[int, int, str]], int]) -> int:
    root, items, classes = job
    total = 0
    for seed, label, name in items:
        image, quality, progressive = make_image(seed, label, classes)
        path = Path(root) / name
        image.save(path, quality=quality, progressive=progressive, optimize=False)
        total += path.stat().st_size
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--train", type=int, default=100_000)
    parser.add_argument("--test", type=int, default=5_000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if args.out.exists():
        print(f"error: {args.out} exists; remove it or choose another folder", file=sys.stderr)
        return 2
    tmp = args.out.with_name(args.out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    items = []
    for split, count, offset in (("train", args.train, 0), ("test", args.test, 10**8)):
        for k in range(args.classes):
            (tmp / split / f"class{k}").mkdir(parents=True)
        for i in range(count):
            label = i % args.classes
            items.append((args.seed * 10**9 + offset + i, label, f"{split}/class{label}/{i:07d}.jpg"))
    jobs = [(str(tmp), items[i : i + 500], args.classes) for i in range(0, len(items), 500)]
    start, written, done = time.perf_counter(), 0, 0
    with ProcessPoolExecutor(args.workers) as pool:
        for size in pool.map(_write, jobs):
            written += size
            done += 1
            if done % 10 == 0 or done == len(jobs):
                rate = done * 500 / (time.perf_counter() - start)
                print(f"\r{min(done * 500, len(items))}/{len(items)} images, {rate:.0f}/s", end="", file=sys.stderr)
    tmp.rename(args.out)
    print(
        f"\n{args.out}: {len(items)} JPEGs, {written / 2**30:.2f} GiB, {written / len(items) / 1024:.0f} KB each "
        f"on average, {time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
