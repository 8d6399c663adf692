"""Does ``torch.compile`` pay on this machine? quicktrain's training step eager against compiled.

Same model, weights, batches and precision; both sides are quicktrain's per-update path (the
Ignite Engine running ``train_step``), interleaved trial by trial after an untimed warm-up.
The compiled side's warm-up (the compilation) is timed on its own and reported, because on a
~10-minute CPU run it counts: the break-even is the compile time over the per-update saving.

    python benchmarks/compile_step.py                                  # speedrun_net, bf16, batch 512
    python benchmarks/compile_step.py --model resnet18 --batch 128 --no-channels-last
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import compare, ratios, spread, step_parser, step_sides


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    base = {"techniques.channels_last": args.channels_last}
    sides = step_sides(args, {"eager": base, "compiled": {**base, "techniques.compile": True}})
    start = time.perf_counter()
    sides["compiled"].run()  # the compilation, timed apart
    compile_s = time.perf_counter() - start
    results = compare(list(sides.values()), repeats=args.repeats)
    ratio = ratios(results, "compiled", "eager")
    per_update = {k: args.batch / statistics.median(v) for k, v in results.items()}  # seconds per update
    print(f"{args.model}, amp {args.amp}, batch {args.batch}, channels-last {args.channels_last}")
    for name, ips in results.items():
        print(f"  {name:9s} {spread(ips, ' img/s')}  ({per_update[name]:.3f} s per update)")
    print(f"  compiled / eager throughput: {spread(ratio)}")
    saving = per_update["eager"] - per_update["compiled"]
    first = f"first compiled call {compile_s:.1f} s"
    if saving > 0:
        print(f"  {first}: pays back after about {compile_s / saving:.0f} updates")
    else:
        print(f"  {first}: never pays back here (compiled is not faster)")


if __name__ == "__main__":
    main()
