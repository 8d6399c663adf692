"""quicktrain's training throughput against a minimal hand-written PyTorch loop.

Same model, initial weights, batches (uint8, already in memory), optimizer, schedule and
precision. The quicktrain side is the per-update path of ``quicktrain train``: Ignite's
Engine running ``train_step`` with the loss tally. The hand side is the shortest loop that
does the same work. Target: ratio (quicktrain / hand) >= 0.97.

    python benchmarks/overhead.py                      # resnet18 and vit_tiny, amp off and bf16
    python benchmarks/overhead.py --models test_vit --amp off --steps 4 --repeats 3
    python benchmarks/overhead.py --models resnet18 --amp bf16 --accum 4   # 4 micro-batches per update
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Side, compare, quicktrain_job, ratios, spread


def sides_for(model: str, amp: str, batch: int, steps: int, accum: int = 1) -> list[Side]:
    job = quicktrain_job(model, amp, batch, steps, accum)
    state, batches, start_weights = job.state, job.batches, job.start

    # ---- the hand-written loop ------------------------------------------------------------
    model = copy.deepcopy(state.model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.01, total_steps=10**6)
    device, precision = job.side.device, state.precision
    mean = torch.tensor([0.4914, 0.4822, 0.4465], device=device).view(1, 3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616], device=device).view(1, 3, 1, 1)

    def hand_side() -> int:
        model.load_state_dict(start_weights)
        model.train()
        for x, y in batches:
            x, y = x.to(device), y.to(device)
            for xm, ym in zip(x.chunk(accum), y.chunk(accum)):  # accum micro-batches, one update
                xm = (xm.float() / 255 - mean) / std
                with precision.autocast():
                    loss = F.cross_entropy(model(xm), ym)
                (loss / accum).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
        return batch * steps

    return [job.side, Side("hand", hand_side, device)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet18,vit_tiny")
    parser.add_argument("--amp", default="off,bf16", help="comma list of amp modes")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--accum", type=int, default=1, help="micro-batches per update on both sides")
    parser.add_argument("--steps", type=int, default=6, help="optimizer updates per timed trial")
    parser.add_argument("--repeats", type=int, default=5, help="timed trials per side")
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    args = parser.parse_args()

    rows = []
    print(
        f"overhead: batch {args.batch_size} (ga {args.accum}), {args.steps} updates per trial, "
        f"{args.repeats} trials, warm-up excluded"
    )
    print(f"{'model':<12} {'amp':<5} {'quicktrain img/s':>24} {'hand img/s':>24} {'ratio q/h':>24}")
    for model in args.models.split(","):
        for amp in args.amp.split(","):
            torch.manual_seed(0)
            sides = sides_for(model, amp, args.batch_size, args.steps, args.accum)
            results = compare(sides, repeats=args.repeats, warmup=1)
            r = ratios(results, "quicktrain", "hand")
            print(
                f"{model:<12} {amp:<5} {spread(results['quicktrain']):>24} {spread(results['hand']):>24} "
                f"{spread(r):>24}",
                flush=True,
            )
            rows.append(
                {
                    "model": model,
                    "amp": amp,
                    "accum": args.accum,
                    **results,
                    "ratio": r,
                    "ratio_median": statistics.median(r),
                }
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
