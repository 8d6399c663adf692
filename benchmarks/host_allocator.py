"""How the host allocator changes a CPU training step: glibc's defaults (``system``) against
``techniques.cpu_allocator=retain`` (freed memory kept for the next step) and, for reference,
PyTorch's transparent huge pages (``THP_MEM_ALLOC_ENABLE=1``).

Each setting is process-wide and set before the first large allocation, so each side runs in a
process of its own, the sides alternating (system, retain, thp, system, ...). Every process
builds the Muon recipe's step (``configs/speedrun_muon_cifar10.yaml``'s optimizer and techniques
through quicktrain's Ignite engine, as ``recipe_step.py`` does), runs one untimed trial, then
times --trials trials of --steps updates. Reported per side: images/s (median [min-max] over its
processes, each the median of its trials) and the process's user and system CPU time over the
timed trials (page faults are system time); per process pair, the ratio to ``system``.

    python benchmarks/host_allocator.py --batch 1024 --repeats 5
    python benchmarks/host_allocator.py --low-res 24 --sides system,retain
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import spread, step_parser

SIDES = {
    "system": ({"techniques.cpu_allocator": "system"}, {}),
    "retain": ({"techniques.cpu_allocator": "retain"}, {}),
    "thp": ({"techniques.cpu_allocator": "system"}, {"THP_MEM_ALLOC_ENABLE": "1"}),
}

CHILD = """
import argparse, json, os, statistics, sys
sys.path.insert(0, sys.argv[1])
from harness import timed
from recipe_step import recipe_job
args = argparse.Namespace(**json.loads(sys.argv[2]))
job = recipe_job(args, args.low_res, **json.loads(sys.argv[3]))
job.side.run()  # warm-up: oneDNN primitives, the allocator's first pages
t0 = os.times()
ips = [timed(job.side) for _ in range(args.trials)]
t1 = os.times()
cpu = {"user_s": t1.user - t0.user, "sys_s": t1.system - t0.system}
print(json.dumps({"images_per_s": statistics.median(ips), "trials": ips, **cpu}))
"""


def measure(side: str, args: argparse.Namespace) -> dict:
    overrides, env = SIDES[side]
    step = {key: getattr(args, key) for key in ("model", "amp", "batch", "steps", "trials", "low_res")}
    cmd = [sys.executable, "-c", CHILD, str(Path(__file__).resolve().parent), json.dumps(step), json.dumps(overrides)]
    out = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = step_parser(__doc__)  # --model, --amp, --batch, --steps; --repeats counts processes per side here
    parser.set_defaults(batch=1024, repeats=3)
    parser.add_argument("--trials", type=int, default=2, help="timed trials per process")
    parser.add_argument("--low-res", type=int, default=None, help="the step of a progressive-resizing epoch")
    parser.add_argument("--sides", default="system,retain,thp", help=f"comma-separated, from {', '.join(SIDES)}")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sides = args.sides.split(",")
    if [s for s in sides if s not in SIDES] or "system" not in sides:
        parser.error(f"--sides {args.sides}: choose from {', '.join(SIDES)}, system among them (the baseline)")
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for _ in range(args.repeats):
        for side in sides:
            runs[side].append(measure(side, args))
            print(f"  {side:7s} {runs[side][-1]['images_per_s']:.1f} img/s", file=sys.stderr, flush=True)
    size = f"{args.low_res} px" if args.low_res else "32 px"
    threads = os.environ.get("OMP_NUM_THREADS", "all")
    print(f"{args.model}, the Muon recipe's step at {size}, batch {args.batch}, {args.steps} updates x "
          f"{args.trials} trials per process, {args.repeats} processes per side, {threads} threads")  # fmt: skip
    ratio = {}
    for side in sides:
        r = runs[side]
        speed, user, system = ([x[key] for x in r] for key in ("images_per_s", "user_s", "sys_s"))
        print(f"  {side:7s} {spread(speed, ' img/s')}, user {spread(user, ' s')}, system {spread(system, ' s')}")
        if side != "system":
            ratio[side] = [a["images_per_s"] / b["images_per_s"] for a, b in zip(r, runs["system"])]
            print(f"  {side} / system throughput: {spread(ratio[side])}")
    if args.json:
        medians = {side: statistics.median(r) for side, r in ratio.items()}
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "runs": runs,
                                         "ratio": ratio, "ratio_median": medians}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
