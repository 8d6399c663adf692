"""uint8 batch -> normalised float batch: the input pipeline's kernels against a single ``addcmul``.

A single ``torch.addcmul(shift, x_uint8, scale, out=buffer)`` reads uint8 and writes float in one
kernel, but TensorIterator runs mixed dtypes through its slow, unvectorised path. The pipeline
(``quicktrain.data.prepare.InputPipeline``) copies uint8 into a float32 buffer and runs the
multiply-add there in place (and, for bfloat16, rounds once into a second buffer): the same values
to the bit. Both sides write into kept buffers; interleaved, warm-up excluded.

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/input_normalise.py --size 224 --batch 64
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Side, compare, ratios, spread

from quicktrain.data.prepare import InputPipeline

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--calls", type=int, default=10, help="batches per trial")
    parser.add_argument("--repeats", type=int, default=7, help="timed trials per side")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    x = torch.randint(0, 256, (args.batch, 3, args.size, args.size), dtype=torch.uint8, device=device)
    print(f"input_normalise: batch {args.batch} x 3 x {args.size}^2 uint8, {device}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")  # fmt: skip
    for dtype in (torch.float32, torch.bfloat16):
        pipe = InputPipeline(device, mean=MEAN, std=STD, dtype=dtype)
        out = torch.empty(x.shape, dtype=dtype, device=device)
        assert torch.equal(pipe(x), torch.addcmul(pipe.shift, x, pipe.scale, out=out))  # the same values

        def side(name, fn, pipe=pipe, out=out):
            def run() -> int:
                for _ in range(args.calls):
                    fn(pipe, out)
                return args.calls * args.batch

            return Side(name, run, device)

        sides = [
            side("one addcmul", lambda pipe, out: torch.addcmul(pipe.shift, x, pipe.scale, out=out)),
            side("pipeline", lambda pipe, out: pipe(x)),
        ]
        got = compare(sides, args.repeats)
        name = str(dtype).removeprefix("torch.")
        for s in sides:
            ms = [1e3 * args.batch / rate for rate in got[s.name]]
            print(f"  {name:<9} {s.name:<12} {spread(ms, ' ms')} a batch")
        ratio = spread(ratios(got, "pipeline", "one addcmul"), "x")
        print(f"  {name:<9} pipeline / one addcmul: {ratio} the throughput")


if __name__ == "__main__":
    main()
