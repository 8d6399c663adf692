"""What does Muon's update cost against SGD's, and what does bf16 Newton-Schulz save?
quicktrain's training step (the Ignite Engine running ``train_step``) with three optimizers:
SGD, Muon with its Newton-Schulz iteration in float32, and in bfloat16.

Same model, weights, batches and precision on every side, interleaved trial by trial after an
untimed warm-up; ratios are taken trial by trial against SGD.

    python benchmarks/muon_step.py                      # speedrun_net, bf16 autocast, batch 512
    OMP_NUM_THREADS=1 taskset -c 0 python benchmarks/muon_step.py --repeats 7
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import compare, ratios, spread, step_parser, step_sides


def main() -> None:
    args = step_parser(__doc__).parse_args()
    variants = {
        "sgd": {"optim.optimizer": "sgd"},
        "muon-fp32": {"optim.optimizer": "muon", "optim.muon_precision": "float32"},
        "muon-bf16": {"optim.optimizer": "muon", "optim.muon_precision": "bfloat16"},
    }
    results = compare(list(step_sides(args, variants).values()), repeats=args.repeats)
    print(f"{args.model}, amp {args.amp}, batch {args.batch}, {args.steps} updates per trial")
    for name, ips in results.items():
        print(f"  {name:10s} {spread(ips, ' img/s')}")
    for name in ("muon-fp32", "muon-bf16"):
        print(f"  {name} / sgd throughput: {spread(ratios(results, name, 'sgd'))}")
    print(f"  muon-bf16 / muon-fp32 throughput: {spread(ratios(results, 'muon-bf16', 'muon-fp32'))}")


if __name__ == "__main__":
    main()
