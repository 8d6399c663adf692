"""What does Muon's update cost against SGD's, and what do bf16 and fewer Newton-Schulz steps save?

Two views, each interleaved trial by trial after an untimed warm-up, ratios taken per trial:

- the whole step (default): quicktrain's training step (the Ignite Engine running ``train_step``)
  with SGD and with Muon variants; same model, weights, batches and precision on every side;
- ``--optimizer-only``: ``optimizer.step()`` alone on the model's parameters with fixed random
  gradients (what a variant costs per update, without the forward and backward around it).

Muon variants: its Newton-Schulz iteration in float32 or bfloat16, 5 steps (Keller Jordan's Muon,
quicktrain's default) or 3 (airbench94_muon's, hiverge/cifar10-speedrun's and the Muon recipe's).

    python benchmarks/muon_step.py                      # speedrun_net, bf16 autocast, batch 512
    python benchmarks/muon_step.py --optimizer-only --repeats 15
    OMP_NUM_THREADS=1 taskset -c 0 python benchmarks/muon_step.py --repeats 7
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Side, compare, ratios, spread, step_parser, step_sides

MUON = {"optim.optimizer": "muon"}
VARIANTS = {
    "sgd": {"optim.optimizer": "sgd"},
    "muon-fp32x5": {**MUON, "optim.muon_precision": "float32", "optim.muon_ns_steps": 5},
    "muon-bf16x5": {**MUON, "optim.muon_precision": "bfloat16", "optim.muon_ns_steps": 5},
    "muon-fp32x3": {**MUON, "optim.muon_precision": "float32", "optim.muon_ns_steps": 3},
    "muon-bf16x3": {**MUON, "optim.muon_precision": "bfloat16", "optim.muon_ns_steps": 3},
}


def optimizer_sides(model_name: str, updates: int) -> dict[str, Side]:
    """One side per variant: ``updates`` optimizer steps on one model's parameters (gradients
    fixed and random), each side with its own optimizer and momentum."""
    import torch

    from quicktrain.config import Config
    from quicktrain.engine.optim import build_optimizer
    from quicktrain.models import create_model

    torch.manual_seed(0)
    model = create_model(model_name, num_classes=10).to(memory_format=torch.channels_last)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    sides = {}
    for name, overrides in VARIANTS.items():
        optimizer = build_optimizer(model, Config.from_overrides(overrides).optim)

        def run(optimizer=optimizer) -> int:
            for _ in range(updates):
                optimizer.step()
            return updates

        sides[name] = Side(name, run, torch.device("cpu"))
    return sides


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--optimizer-only", action="store_true", help="time optimizer.step() alone (ms an update)")
    args = parser.parse_args()
    if args.optimizer_only:
        results = compare(list(optimizer_sides(args.model, args.steps).values()), repeats=args.repeats)
        print(f"{args.model}: optimizer.step() alone, {args.steps} updates per trial")
        for name, ups in results.items():
            print(f"  {name:12s} {spread([1000 / u for u in ups], ' ms an update')}")
    else:
        results = compare(list(step_sides(args, VARIANTS).values()), repeats=args.repeats)
        print(f"{args.model}, amp {args.amp}, batch {args.batch}, {args.steps} updates per trial")
        for name, ips in results.items():
            print(f"  {name:12s} {spread(ips, ' img/s')}")
    unit = "updates/s" if args.optimizer_only else "throughput"
    for name in VARIANTS:
        if name != "sgd":
            print(f"  {name} / sgd {unit}: {spread(ratios(results, name, 'sgd'))}")
    print(f"  muon-bf16x3 / muon-fp32x5 {unit}: {spread(ratios(results, 'muon-bf16x3', 'muon-fp32x5'))}")


if __name__ == "__main__":
    main()
