"""``quicktrain autotune``: time each combination of speed switches on this machine, keep the fastest.

Candidates: AMP off / bf16 (where the hardware computes it natively) / fp16 (CUDA),
channels-last off/on, the DataLoader or the device-resident loader, and torch.compile off/on
(on a CPU only with ``--with-compile``: each compile costs minutes), and TF32 on CUDA. Each
candidate builds the real model and training step, runs a few untimed warm-up updates on
generated images of the run's size, then is timed over a few updates, several times,
interleaved with the plain reference; only the reference and one candidate are built at once. Every
number is measured, none assumed. A candidate that switches fewer things on and ties with the
fastest (its best trial within ``tolerance`` of the fastest median: a difference inside the
noise) wins: simpler settings are kept unless speed says otherwise.
"""

from __future__ import annotations

import itertools
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from quicktrain.atomic import atomic_write_text
from quicktrain.config import Config
from quicktrain.errors import ConfigError
from quicktrain.techniques.precision import cpu_supports_bf16

log = logging.getLogger("quicktrain")


@dataclass(frozen=True)
class Candidate:
    amp: str = "off"
    channels_last: bool = False
    compile: bool = False
    loader: str = "torch"
    tf32: bool = False

    @property
    def switches(self) -> int:
        """How many things this candidate turns on (fewer = simpler)."""
        return (self.amp != "off") + self.channels_last + self.compile + (self.loader != "torch") + self.tf32

    @property
    def name(self) -> str:
        on = [f"amp={self.amp}"] if self.amp != "off" else []
        on += [n for n, v in (("channels_last", self.channels_last), ("compile", self.compile)) if v]
        on += ["loader=device"] if self.loader == "device" else []
        on += ["tf32"] if self.tf32 else []
        return "+".join(on) or "plain"

    def overrides(self) -> dict[str, Any]:
        return {
            "techniques.amp": self.amp,
            "techniques.channels_last": self.channels_last,
            "techniques.compile": self.compile,
            "data.loader": self.loader,
            "techniques.tf32": self.tf32,
        }


SWITCHES = ("amp", "channels_last", "compile", "loader", "tf32")


def candidates(device: torch.device, with_compile: bool, switches: tuple[str, ...] = SWITCHES) -> list[Candidate]:
    """Every combination of the ``switches`` this device has; the others stay off/default."""
    unknown = sorted(set(switches) - set(SWITCHES))
    if unknown:
        raise ConfigError(f"unknown autotune switch '{unknown[0]}'; accepted: {', '.join(SWITCHES)}")
    amps = ["off"]
    if device.type == "cuda":
        amps += (["bf16"] if torch.cuda.is_bf16_supported() else []) + ["fp16"]
    elif cpu_supports_bf16():
        amps.append("bf16")
    cuda = device.type == "cuda"
    options = {
        "amp": amps,
        "channels_last": [False, True],
        "compile": [False, True] if with_compile or cuda else [False],
        "loader": ["torch", "device"],
        "tf32": [False, True] if cuda else [False],
    }
    chosen = [options[name] if name in switches else options[name][:1] for name in SWITCHES]
    return [Candidate(a, cl, c, ld, tf) for a, cl, c, ld, tf in itertools.product(*chosen)]


def pick(results: dict[Candidate, list[float]], tolerance: float = 0.03) -> Candidate:
    """The fastest by median images/s, unless a candidate with fewer switches ties with it: its
    fastest trial reaches within ``tolerance`` of the winner's median (a tie within noise)."""
    medians = {c: statistics.median(v) for c, v in results.items()}
    best = max(medians.values())
    close = [c for c, v in results.items() if max(v) >= best * (1 - tolerance)]
    return min(close, key=lambda c: (c.switches, -medians[c]))


def measure_candidate(base: Config, candidate: Candidate, warmup: int, steps: int) -> Callable[[], float]:
    """A function that times ``steps`` updates of the real training step (after ``warmup``
    untimed ones, done here) and returns images/s."""
    from quicktrain.engine.loop import training_engine
    from quicktrain.engine.setup import build_run
    from quicktrain.metrics import synchronize

    batch = base.run.batch_size
    cfg = Config.from_overrides(
        {
            **candidate.overrides(),
            "data.dataset": "synthetic",
            "data.max_train_samples": batch * steps,
            "data.max_test_samples": 10,
            "data.resolution": base.data.resolution,
            "run.epochs": 10**4,  # the schedule never ends during timing
            "run.progress": False,
            "run.tensorboard": False,
        },
        base,
    )
    run = build_run(cfg, progress=False)
    engine, _ = training_engine(run.state)
    engine.run(run.train_loader, max_epochs=1, epoch_length=min(warmup, len(run.train_loader)))

    def timed() -> float:
        engine.state.max_epochs = None
        synchronize(run.device)
        start = time.perf_counter()
        engine.run(run.train_loader, max_epochs=1, epoch_length=len(run.train_loader))
        synchronize(run.device)
        return batch * steps / (time.perf_counter() - start)

    return timed


TABLE_COLUMNS = ("candidate", "images_per_s", "min", "max", "vs_plain")


@dataclass
class AutotuneResult:
    best: Candidate
    results: dict[Candidate, list[float]]
    config: Config

    def table(self) -> list[dict[str, Any]]:
        base = statistics.median(self.results.get(Candidate(), [float("nan")]))
        rows = []
        for c, values in sorted(self.results.items(), key=lambda kv: -statistics.median(kv[1])):
            m = statistics.median(values)
            rows.append(
                {
                    "candidate": c.name + (" <- chosen" if c == self.best else ""),
                    "images_per_s": m,
                    "min": min(values),
                    "max": max(values),
                    "vs_plain": m / base,
                }
            )
        return rows


def autotune(
    base: Config,
    cands: list[Candidate],
    repeats: int = 3,
    warmup: int = 2,
    steps: int = 3,
    tolerance: float = 0.03,
    timer: Callable[[Candidate], Callable[[], float]] | None = None,
) -> AutotuneResult:
    """Time every candidate ``repeats`` times and return the base config with the winner's
    switches. ``timer(candidate)`` builds a candidate and returns its timing function (tests
    replace the real measurement).

    At most two candidates live at once (on a GPU, each is a model, optimizer and data): the
    first candidate (plain) stays built as the reference; every other one is built, timed
    interleaved with it (A R R A A R ...), and freed before the next is built. Its throughput
    is then its paired ratio to the reference times the reference's overall median, so
    candidates timed at different moments compare fairly."""
    make = timer or (lambda c: measure_candidate(base, c, warmup, steps))
    reference, others = cands[0], cands[1:]
    log.info(f"autotune: preparing the reference, {reference.name} (warm-up untimed)")
    run_reference = make(reference)
    raw: list[float] = []
    ratios: dict[Candidate, list[float]] = {}
    for c in others:
        log.info(f"autotune: preparing {c.name} (warm-up untimed)")
        ratios[c] = _paired(make(c), run_reference, repeats, raw)  # nothing keeps it built afterwards
        _release_memory()
    if not others:
        raw = [run_reference() for _ in range(repeats)]
    middle = statistics.median(raw)
    results = {reference: raw, **{c: [r * middle for r in ratios[c]] for c in others}}
    best = pick(results, tolerance)
    return AutotuneResult(best, results, Config.from_overrides(best.overrides(), base))


def _paired(runner: Callable[[], float], reference: Callable[[], float], repeats: int, raw: list[float]) -> list[float]:
    """``runner``'s throughput over the reference's, per trial, alternating who goes first;
    the reference's own figures are appended to ``raw``."""
    ratios = []
    for trial in range(repeats):
        if trial % 2 == 0:
            mine, ref = runner(), reference()
        else:
            ref, mine = reference(), runner()
        raw.append(ref)
        ratios.append(mine / ref)
    return ratios


def _release_memory() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def write_fragment(result: AutotuneResult, path: Path, command: str) -> Path:
    from quicktrain.reporting import format_table

    table = format_table(result.table(), TABLE_COLUMNS)
    header = "".join(f"# {line}\n" for line in [f"written by: {command}", "", *table.splitlines(), ""])
    atomic_write_text(path, header + result.config.to_yaml())
    return path
