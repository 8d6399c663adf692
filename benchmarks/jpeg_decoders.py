"""Which JPEG decoder is fastest on this machine, for building a photo store and for the jpeg store's epochs.

    taskset -c 1 python benchmarks/jpeg_decoders.py FOLDER [--images 2000] [--side 256] [--repeats 5] [--json OUT]

Two jobs, each timed for every decoder installed, interleaved (the order rotates each repeat), the
first pass a warm-up that is not counted; one process, one thread:

* **build**: a source photo (300-500 px JPEG) to its store size (shorter side ``--side``), as
  :func:`quicktrain.data.photo_store.decode_photo` does: Pillow with ``draft`` (libjpeg's 1/2, 1/4,
  1/8 DCT scaling) then an antialiased resize; simplejpeg with ``min_height``/``min_width`` (the
  same DCT scaling in libjpeg-turbo) then the same resize; TorchCodec decodes at full size (it has
  no reduced-size path) then the same resize. Encoding the result at quality 90 is timed too
  (Pillow and simplejpeg).
* **epoch**: a stored JPEG (the store side, quality 90) to pixels, as the jpeg store's loader does.

Prints images/s (median [min-max] over repeats) and each decoder's ratio to Pillow's in the same
repeat (median [min-max]); ``--json`` writes every repeat.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quicktrain.data import jpeg


def _target(width: int, height: int, side: int) -> tuple[int, int]:
    short = min(width, height)
    return math.ceil(width * side / short), math.ceil(height * side / short)


def _resize(pixels: np.ndarray, side: int) -> np.ndarray:
    h, w = pixels.shape[:2]
    if min(h, w) <= side:
        return pixels
    return np.asarray(Image.fromarray(pixels).resize(_target(w, h, side), Image.BILINEAR))


def build_pillow(data: bytes, side: int) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        img.draft("RGB", _target(*img.size, side))
        return _resize(np.asarray(img.convert("RGB")), side)


def build_simplejpeg(data: bytes, side: int) -> np.ndarray:
    import simplejpeg

    h, w, _, _ = simplejpeg.decode_jpeg_header(data)
    tw, th = _target(w, h, side)
    return _resize(simplejpeg.decode_jpeg(data, colorspace="RGB", min_height=th, min_width=tw), side)


def build_torchcodec(data: bytes, side: int) -> np.ndarray:
    return _resize(jpeg.decoder("torchcodec")(data), side)


BUILD = {"pillow": build_pillow, "simplejpeg": build_simplejpeg, "torchcodec": build_torchcodec}


def encode_pillow(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=jpeg.QUALITY, subsampling=2)
    return out.getvalue()


def encode_simplejpeg(pixels: np.ndarray) -> bytes:
    import simplejpeg

    return simplejpeg.encode_jpeg(pixels, quality=jpeg.QUALITY, colorspace="RGB", colorsubsampling="420")


ENCODE = {"pillow": encode_pillow, "simplejpeg": encode_simplejpeg}


def time_pass(fn: Callable, items: list) -> float:
    start = time.perf_counter()
    for item in items:
        fn(item)
    return len(items) / (time.perf_counter() - start)


def interleaved(candidates: dict[str, Callable], items: list, repeats: int) -> dict[str, list[float]]:
    names = list(candidates)
    for name in names:  # warm-up: imports, caches
        time_pass(candidates[name], items[:20])
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            rates[name].append(time_pass(candidates[name], items))
    return rates


def summarise(job: str, rates: dict[str, list[float]]) -> list[str]:
    lines = [f"{job}: images/s median [min-max], ratio to Pillow in the same repeat"]
    base = rates["pillow"]
    for name, values in rates.items():
        ratios = [v / b for v, b in zip(values, base)]
        lines.append(
            f"  {name:<11} {statistics.median(values):7.0f} [{min(values):.0f}-{max(values):.0f}]   "
            f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder of JPEGs (searched recursively)")
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--side", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    files = sorted(args.folder.rglob("*.jpg"))[: args.images]
    if not files:
        print(f"error: no .jpg files under {args.folder}", file=sys.stderr)
        return 2
    sources = [f.read_bytes() for f in files]  # from memory: the decoders, not the disk
    installed = [name for name in ("pillow", "simplejpeg", "torchcodec") if jpeg.installed(name)]
    side = args.side
    build = {name: (lambda data, f=BUILD[name]: f(data, side)) for name in installed}
    stored = [build_pillow(data, side) for data in sources]
    encode = {name: fn for name, fn in ENCODE.items() if name in installed}
    packed = [encode_pillow(pixels) for pixels in stored]
    epoch = {name: jpeg.decoder(name) for name in installed}
    results = {
        "build": interleaved(build, sources, args.repeats),
        "encode": interleaved(encode, stored, args.repeats),
        "epoch": interleaved(epoch, packed, args.repeats),
    }
    header = (
        f"{len(files)} images from {args.folder.name} (mean {np.mean([len(s) for s in sources]) / 1024:.0f} KB), "
        f"store side {side} (stored JPEGs mean {np.mean([len(p) for p in packed]) / 1024:.0f} KB), "
        f"{args.repeats} repeats, one thread; {platform.processor() or platform.machine()}"
    )
    print(header)
    for job, rates in results.items():
        print("\n".join(summarise(job, rates)))
    if args.json:
        args.json.write_text(json.dumps({"setup": header, "rates": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
