"""What does Muon's update cost against SGD's, and what does bf16 Newton-Schulz save?
quicktrain's training step (the Ignite Engine running ``train_step``) with three optimizers:
SGD, Muon with its Newton-Schulz iteration in float32, and in bfloat16.

Same model, weights, batches and precision on every side, interleaved trial by trial after an
untimed warm-up; ratios are taken trial by trial against SGD.

    python benchmarks/muon_step.py                      # speedrun_net, bf16 autocast, batch 512
    OMP_NUM_THREADS=1 taskset -c 0 python benchmarks/muon_step.py --repeats 7
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import compare, quicktrain_job, ratios, spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="speedrun_net")
    parser.add_argument("--amp", default="auto")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--steps", type=int, default=3, help="updates per trial")
    parser.add_argument("--repeats", type=int, default=5, help="trials per side")
    args = parser.parse_args()
    variants = {
        "sgd": {"optim.optimizer": "sgd"},
        "muon-fp32": {"optim.optimizer": "muon", "optim.muon_precision": "float32"},
        "muon-bf16": {"optim.optimizer": "muon", "optim.muon_precision": "bfloat16"},
    }
    sides = []
    for name, overrides in variants.items():
        job = quicktrain_job(args.model, args.amp, args.batch, args.steps, overrides=overrides)
        job.side.name = name
        sides.append(job.side)
    results = compare(sides, repeats=args.repeats)
    print(f"{args.model}, amp {args.amp}, batch {args.batch}, {args.steps} updates per trial")
    for name, ips in results.items():
        print(f"  {name:10s} {spread(ips, ' img/s')}")
    for name in ("muon-fp32", "muon-bf16"):
        print(f"  {name} / sgd throughput: {spread(ratios(results, name, 'sgd'))}")
    print(f"  muon-bf16 / muon-fp32 throughput: {spread(ratios(results, 'muon-bf16', 'muon-fp32'))}")


if __name__ == "__main__":
    main()
