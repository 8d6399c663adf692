"""``quicktrain autotune``: time each combination of speed switches on this machine, keep the fastest.

Candidates: every combination of the values the registered techniques offer for this device
(:mod:`quicktrain.techniques.registry`): AMP off / bf16 (where the hardware computes it natively) /
fp16 (CUDA), channels-last off/on, the DataLoader or the device-resident loader, torch.compile
off/on (on a CPU only with ``--with-compile``: each compile costs minutes), and TF32 on CUDA. Each
candidate builds the real model and training step, runs a few untimed warm-up updates on
generated images of the run's size, then is timed over a few updates, several times,
interleaved with the plain reference; only the reference and one candidate are built at once. Every
number is measured, none assumed.

Each candidate is compared by its throughput over the reference's in the same trial pair, so load
from other work on the machine, which slows both sides of a pair alike, cancels out. The fastest
median is named the winner only when its spread is clear of every other candidate's (its slowest
pair beats their fastest); candidates whose spreads overlap it (or whose fastest pair is within
``tolerance`` of its median) are not resolved from it, and the simplest of them (fewest switches)
is kept, and the result says which candidates overlapped instead of calling one the fastest.
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
from quicktrain.techniques.registry import Spec, spec, specs

log = logging.getLogger("quicktrain")


@dataclass(frozen=True, init=False)
class Candidate:
    """One combination of technique values, e.g. ``Candidate(amp="bf16", channels_last=True)``;
    techniques not named stay at their plain value (the registry's ``off``)."""

    choices: tuple[tuple[str, Any], ...]  # (technique, value) of those not at their plain value

    def __init__(self, **values: Any) -> None:
        chosen = tuple((s.name, values[s.name]) for s in tunable() if s.name in values and values[s.name] != s.off)
        unknown = sorted(set(values) - {s.name for s in tunable()})
        if unknown:
            raise ConfigError(f"unknown autotune switch '{unknown[0]}'; accepted: {', '.join(switch_names())}")
        object.__setattr__(self, "choices", chosen)

    def get(self, name: str) -> Any:
        """The value this candidate gives technique ``name``."""
        return dict(self.choices).get(name, spec(name).off)

    @property
    def switches(self) -> int:
        """How many things this candidate turns on (fewer = simpler)."""
        return len(self.choices)

    @property
    def name(self) -> str:
        return "+".join(n if v is True else f"{n}={v}" for n, v in self.choices) or "plain"

    def overrides(self) -> dict[str, Any]:
        values = dict(self.choices)
        return {s.key: values.get(s.name, s.off) for s in tunable()}


def tunable() -> list[Spec]:
    """The registered techniques autotune can time (those with values to try)."""
    return [s for s in specs() if s.tune is not None]


def switch_names() -> tuple[str, ...]:
    return tuple(s.name for s in tunable())


def candidates(
    device: torch.device, with_compile: bool, switches: tuple[str, ...] | None = None, base: Config | None = None
) -> list[Candidate]:
    """Every combination of the ``switches`` this device has (default: every tunable technique);
    the others keep ``base``'s value (their plain value without one). The first is the reference."""
    names = switch_names()
    switches = names if switches is None else switches
    unknown = sorted(set(switches) - set(names))
    if unknown:
        raise ConfigError(f"unknown autotune switch '{unknown[0]}'; accepted: {', '.join(names)}")

    def kept(spec: Spec) -> Any:
        if base is None:
            return spec.off
        section, _, leaf = spec.key.partition(".")
        return getattr(getattr(base, section), leaf)

    options = [s.tune_values(device.type, with_compile) if s.name in switches else [kept(s)] for s in tunable()]
    return [Candidate(**dict(zip(names, values))) for values in itertools.product(*options)]


def decide(results: dict[Candidate, list[float]], tolerance: float = 0.03) -> tuple[Candidate, list[Candidate]]:
    """(the candidate kept, the candidates not resolved from the fastest). The fastest median leads;
    every candidate whose fastest trial reaches the leader's slowest (the spreads overlap) or comes
    within ``tolerance`` of its median ties with it, and the simplest of the tied is kept."""
    medians = {c: statistics.median(v) for c, v in results.items()}
    leader = max(medians, key=medians.__getitem__)
    floor = min(min(results[leader]), medians[leader] * (1 - tolerance))
    tied = [c for c, v in results.items() if max(v) >= floor]
    tied.sort(key=lambda c: (c.switches, -medians[c]))
    return tied[0], tied


def pick(results: dict[Candidate, list[float]], tolerance: float = 0.03) -> Candidate:
    """The candidate :func:`decide` keeps."""
    return decide(results, tolerance)[0]


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
    run = build_run(cfg, progress=False)  # sets its process-wide flags (TF32, cudnn.benchmark) ...
    engine, _ = training_engine(run.state)
    engine.run(run.train_loader, max_epochs=1, epoch_length=min(warmup, len(run.train_loader)))
    run.techniques.restore_process()  # ... which hold only while this candidate runs, never the next one's

    def timed() -> float:
        engine.state.max_epochs = None
        run.techniques.apply_process()
        try:
            synchronize(run.device)
            start = time.perf_counter()
            engine.run(run.train_loader, max_epochs=1, epoch_length=len(run.train_loader))
            synchronize(run.device)
            return batch * steps / (time.perf_counter() - start)
        finally:
            run.techniques.restore_process()

    return timed


TABLE_COLUMNS = ("candidate", "images_per_s", "min", "max", "vs_plain", "vs_plain_min", "vs_plain_max")


@dataclass
class AutotuneResult:
    best: Candidate
    results: dict[Candidate, list[float]]  # images/s per trial (the others': paired ratio x the reference's median)
    config: Config
    tied: list[Candidate] | None = None  # the candidates not resolved from the fastest (best among them)
    ratios: dict[Candidate, list[float]] | None = None  # per trial pair, over the reference

    def verdict(self) -> str:
        """One line: a clear winner, or which candidates' spreads overlapped."""
        tied = self.tied or [self.best]
        if len(tied) == 1:
            return f"{self.best.name} is the fastest: its slowest trial beats every other candidate's fastest"
        names = ", ".join(c.name for c in tied)
        return (
            f"not resolved: {names} overlap (their spreads in the table); keeping the simplest, {self.best.name}. "
            "A quieter machine may separate them; more --repeats only widen a min-max spread"
        )

    def table(self) -> list[dict[str, Any]]:
        reference = next(iter(self.results))  # the first timed: plain, or the base config's own setting
        base = statistics.median(self.results[reference])
        rows = []
        for c, values in sorted(self.results.items(), key=lambda kv: -statistics.median(kv[1])):
            m = statistics.median(values)
            paired = (self.ratios or {}).get(c) or [v / base for v in values]
            rows.append(
                {
                    "candidate": c.name + (" <- chosen" if c == self.best else ""),
                    "images_per_s": m,
                    "min": min(values),
                    "max": max(values),
                    "vs_plain": statistics.median(paired),
                    "vs_plain_min": min(paired),
                    "vs_plain_max": max(paired),
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
    paired = {reference: [1.0] * len(raw), **ratios}  # the reference's own spread is the machine's load
    best, tied = decide(paired if others else results, tolerance)
    return AutotuneResult(best, results, Config.from_overrides(best.overrides(), base), tied, paired)


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
