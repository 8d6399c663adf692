"""The rules every quicktrain benchmark follows, in one place.

- Both sides run in the same process and the same run, interleaved trial by trial
  (A B A B ...), so drift of a shared machine hits them alike.
- Warm-up runs first and is never timed (allocator, oneDNN/cuDNN kernel selection, compile).
- The device is synchronised before the clock is read, at both ends.
- Each side is timed over several trials; we report the median and the min-max spread,
  and the ratio of throughputs per trial pair (median and spread), never a lone time.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from quicktrain.metrics import synchronize


@dataclass
class Side:
    name: str
    # does the work once, returns how many images it processed; or (images, seconds) when the
    # side times its own steady-state part (a framework's per-call set-up left out)
    run: Callable[[], int | tuple[int, float]]
    device: torch.device


def timed(side: Side) -> float:
    """Images per second for one call of ``side.run``."""
    synchronize(side.device)
    start = time.perf_counter()
    done = side.run()
    synchronize(side.device)
    elapsed = time.perf_counter() - start
    if isinstance(done, tuple):
        done, elapsed = done
    return done / elapsed


def compare(sides: list[Side], repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Throughput of each side per trial, interleaved, after ``warmup`` untimed calls each."""
    for side in sides:
        for _ in range(warmup):
            side.run()
    results: dict[str, list[float]] = {s.name: [] for s in sides}
    for trial in range(repeats):
        order = sides if trial % 2 == 0 else sides[::-1]  # alternate who goes first
        for side in order:
            results[side.name].append(timed(side))
    return results


def spread(values: list[float], unit: str = "") -> str:
    """``median[unit] [min-max]``, e.g. ``680.1 s [673.1-722.9]``."""
    return f"{statistics.median(values):.4g}{unit} [{min(values):.4g}-{max(values):.4g}]"


def ratios(results: dict[str, list[float]], numerator: str, denominator: str) -> list[float]:
    return [a / b for a, b in zip(results[numerator], results[denominator])]


@dataclass
class QuicktrainJob:
    """quicktrain's per-update path on in-memory synthetic batches, for comparing with others."""

    side: Side
    state: Any  # the TrainState: its model, precision and device for the other side
    batches: list  # uint8 (x, y) effective batches, identical for every side
    start: dict  # initial weights every trial starts from


def quicktrain_job(
    model: str, amp: str, batch: int, steps: int, accum: int = 1, lr: float = 0.01, overrides: dict | None = None
) -> QuicktrainJob:
    """The Ignite Engine running ``train_step`` with the loss tally, exactly as ``quicktrain
    train`` drives it, over ``steps`` updates of ``batch`` images split into ``accum`` micro-batches."""
    from quicktrain.config import Config
    from quicktrain.engine.loop import training_engine
    from quicktrain.engine.setup import build_run

    cfg = Config.from_overrides(
        {
            "data.dataset": "synthetic",
            "data.max_train_samples": batch * steps,
            "data.max_test_samples": 10,
            "model.name": model,
            "run.batch_size": batch,
            "techniques.accum_steps": accum,
            "techniques.amp": amp,
            "optim.lr": lr,
            "run.epochs": 1000,  # a long schedule: the benchmark never runs out of it
            "run.progress": False,
            **(overrides or {}),
        }
    )
    run = build_run(cfg, progress=False)
    batches = list(run.train_loader)  # in memory, identical for every side
    state = run.state
    start = copy.deepcopy(state.model.state_dict())
    engine, _ = training_engine(state)

    def run_once() -> int:
        state.model.load_state_dict(start)
        engine.run(batches, max_epochs=1)
        return batch * steps

    return QuicktrainJob(Side("quicktrain", run_once, run.device), state, batches, start)


def step_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a benchmark that compares variants of quicktrain's training step."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="speedrun_net")
    parser.add_argument("--amp", default="auto")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--steps", type=int, default=3, help="updates per trial")
    parser.add_argument("--repeats", type=int, default=5, help="trials per side")
    return parser


def step_sides(args: argparse.Namespace, variants: dict[str, dict]) -> dict[str, Side]:
    """One named side per variant of the step: :func:`quicktrain_job` with that variant's config
    overrides, from ``step_parser``'s options."""
    sides = {}
    for name, overrides in variants.items():
        side = quicktrain_job(args.model, args.amp, args.batch, args.steps, overrides=overrides).side
        side.name = name
        sides[name] = side
    return sides
