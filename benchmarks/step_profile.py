"""Where does a training step's time go? torch.profiler over quicktrain's step (the Ignite Engine
running ``train_step``, the Muon recipe's optimizer), per operation and input shape.

A profile, not a speed claim: the profiler's own overhead is in it, and one run says nothing about
spread. It is how ``--gemm-wgrad`` was found (the backward-weights pass on small maps).

    OMP_NUM_THREADS=1 python benchmarks/step_profile.py
    python benchmarks/step_profile.py --low-res 24 --rows 30
"""

from __future__ import annotations

import sys
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import step_parser
from recipe_step import recipe_job


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--low-res", type=int, default=None, help="profile a progressive-resizing epoch's step")
    parser.add_argument("--gemm-wgrad", action="store_true", help="with techniques.gemm_wgrad")
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    job = recipe_job(args, args.low_res, **{"techniques.gemm_wgrad": args.gemm_wgrad})
    job.side.run()  # warm-up: oneDNN primitives, allocator
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        job.side.run()
    events = sorted(prof.key_averages(group_by_input_shape=True), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    print(f"{args.model}, batch {args.batch}, {args.steps} updates, self CPU time per update (ms), largest first:")
    for e in events[: args.rows]:
        shapes = ", ".join(str(s) for s in e.input_shapes if s)[:80]
        ms = e.self_cpu_time_total / 1e3 / args.steps
        print(f"  {ms:7.1f} {100 * e.self_cpu_time_total / total:5.1f}%  {e.key:40s} x{e.count // args.steps} {shapes}")


if __name__ == "__main__":
    main()
