"""quicktrain against PyTorch Lightning's Trainer doing the same job.

Same model and initial weights, same uint8 batches held in memory, same effective batch and
gradient accumulation (Lightning gets the micro-batches and ``accumulate_grad_batches``),
same precision (Lightning's ``bf16-mixed`` is the same CPU autocast), same SGD + one-cycle
schedule stepped per update, normalisation in the step on both sides. Lightning's per-fit
set-up (Trainer construction, hooks, strategy) is left out of its time: only the updates
are timed, from the first batch to the end of training, so the ratio is per-update overhead.
Target: ratio (quicktrain / Lightning) >= 1.

    python benchmarks/vs_lightning.py                                   # resnet18, bf16, ga 1 and 4
    python benchmarks/vs_lightning.py --models test_vit --steps 3 --repeats 3
    python benchmarks/vs_lightning.py --profile        # per-op work of one trial on each side

``--profile`` runs one trial of each side under torch.profiler after the warm-up and prints
operator calls and self CPU time per side, the heaviest operators beside each other: if the
two sides did different work per micro-batch, it shows there.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Side, compare, quicktrain_job, ratios, spread

LR = 0.01


def lightning_side(model: torch.nn.Module, start: dict, batches: list, accum: int, amp: str, device) -> Side:
    import lightning as L

    micro = [
        (x[i : i + len(x) // accum], y[i : i + len(x) // accum])
        for x, y in batches
        for i in range(0, len(x), len(x) // accum)
    ]
    mean = torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1)

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model

        def training_step(self, batch, batch_idx):
            x, y = batch
            x = (x.float() / 255 - mean.to(x.device)) / std.to(x.device)
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=LR, momentum=0.9, nesterov=True, weight_decay=5e-4)
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=10**6)
            return [opt], [{"scheduler": sched, "interval": "step"}]

    class Clock(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            if batch_idx == 0:
                self.start = time.perf_counter()

        def on_train_end(self, trainer, pl_module) -> None:
            self.seconds = time.perf_counter() - self.start

    module = Module()
    images = sum(len(y) for _, y in batches)

    def run() -> tuple[int, float]:
        module.net.load_state_dict(start)
        clock = Clock()
        trainer = L.Trainer(
            accelerator="cpu" if device.type == "cpu" else "gpu",
            devices=1,
            precision="bf16-mixed" if amp == "bf16" else ("16-mixed" if amp == "fp16" else "32-true"),
            accumulate_grad_batches=accum,
            max_epochs=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            callbacks=[clock],
        )
        # batch_size=None: the micro-batches pass through as they are (a bare list would mean many loaders)
        trainer.fit(module, train_dataloaders=torch.utils.data.DataLoader(micro, batch_size=None))
        return images, clock.seconds

    return Side("lightning", run, device)


def sides_for(model: str, amp: str, batch: int, accum: int, steps: int) -> list[Side]:
    job = quicktrain_job(model, amp, batch, steps, accum, lr=LR)
    twin = copy.deepcopy(job.state.model)
    return [job.side, lightning_side(twin, job.start, job.batches, accum, job.state.precision.mode, job.side.device)]


def profile_sides(sides: list[Side], top: int = 12) -> None:
    """Operator calls and self CPU milliseconds of one trial per side, heaviest first."""
    from torch.profiler import ProfilerActivity, profile

    tables = {}
    for side in sides:
        side.run()  # warm-up, as in the timed comparison
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            side.run()
        tables[side.name] = {e.key: (e.count, e.self_cpu_time_total / 1e3) for e in prof.key_averages()}
    names = list(tables)
    for name, table in tables.items():
        calls = sum(c for c, _ in table.values())
        print(f"  {name}: {calls} operator calls, {sum(t for _, t in table.values()):.0f} ms self CPU")
    keys = {k for t in tables.values() for k in t}
    heaviest = sorted(keys, key=lambda k: -max(t.get(k, (0, 0))[1] for t in tables.values()))
    print(f"  {'operator':<48}" + "".join(f"{n + ' calls':>18}{n + ' ms':>16}" for n in names))
    for key in heaviest[:top]:
        cells = "".join(f"{tables[n].get(key, (0, 0))[0]:>18}{tables[n].get(key, (0, 0))[1]:>16.1f}" for n in names)
        print(f"  {key[:48]:<48}{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet18")
    parser.add_argument("--amp", default="bf16", help="comma list: off, bf16 (fp16 on CUDA)")
    parser.add_argument("--accum", default="1,4", help="comma list of accumulation steps")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=6, help="optimizer updates per timed trial")
    parser.add_argument("--repeats", type=int, default=5, help="timed trials per side")
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    parser.add_argument("--profile", action="store_true", help="profile one trial per side instead of timing")
    args = parser.parse_args()
    import logging

    for name in ("lightning", "lightning.pytorch", "lightning.pytorch.utilities.rank_zero"):
        logging.getLogger(name).setLevel(logging.ERROR)

    rows = []
    print(
        f"vs Lightning: batch {args.batch_size}, {args.steps} updates per trial, {args.repeats} trials, "
        "warm-up excluded"
    )
    print(f"{'model':<10} {'amp':<5} {'ga':>3} {'quicktrain img/s':>24} {'lightning img/s':>24} {'ratio q/l':>24}")
    for model in args.models.split(","):
        for amp in args.amp.split(","):
            for accum in (int(a) for a in args.accum.split(",")):
                torch.manual_seed(0)
                sides = sides_for(model, amp, args.batch_size, accum, args.steps)
                if args.profile:
                    print(f"{model} {amp} ga {accum}:")
                    profile_sides(sides)
                    continue
                results = compare(sides, repeats=args.repeats, warmup=1)
                r = ratios(results, "quicktrain", "lightning")
                print(
                    f"{model:<10} {amp:<5} {accum:>3} {spread(results['quicktrain']):>24} "
                    f"{spread(results['lightning']):>24} {spread(r):>24}",
                    flush=True,
                )
                rows.append(
                    {
                        "model": model,
                        "amp": amp,
                        "accum": accum,
                        **results,
                        "ratio": r,
                        "ratio_median": statistics.median(r),
                    }
                )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
