"""Run records -> per (model, dataset, technique combination) statistics.

Reads only the files a run record holds (``summary.json``, ``metrics.jsonl``, ``evals.jsonl``,
``arm.json`` when an ablation wrote one). A combination's name lists the techniques it switched
on (``amp+ga``); the one with none is ``baseline``, and speed-ups are measured against it,
paired by seed (each repeat against the baseline of the same repeat) where possible.

Two kinds of speed-up:
- **to a target** (runs with ``target_accuracy``): baseline's time to the target / the arm's,
  paired by seed, and only when every run of both sides reached it. This is "faster to the
  same accuracy", the field's measure (MLPerf Training, DAWNBench).
- **per fixed work** (no target): baseline's training time / the arm's for the same number of
  epochs: faster per step, which says nothing about the accuracy reached.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicktrain.records import BASELINE, dataset_slug, technique_arm

NEAR_CHANCE = 1.5  # accuracy below 1.5x chance (0.15 for 10 classes) is "near chance": not informative


def mlperf_mean(values: list[float]) -> float | None:
    """MLPerf Training's rule for image classification: of 5 or more results, drop the
    fastest and the slowest and average the rest; None with fewer than 5.

    >>> mlperf_mean([10.0, 1.0, 3.0, 2.0, 4.0])
    3.0
    """
    if len(values) < 5:
        return None
    kept = sorted(values)[1:-1]
    return sum(kept) / len(kept)


@dataclass(frozen=True)
class RunInfo:
    folder: Path
    model: str
    dataset: str
    arm: str
    seed: int | None
    status: str
    error: str | None
    summary: dict[str, Any]
    history: list[dict[str, Any]]
    evals: list[dict[str, Any]] = field(default_factory=list)

    def get(self, key: str) -> Any:
        return self.summary.get(key)

    @property
    def reached(self) -> bool:
        return self.get("time_to_target_s") is not None


def load_runs(root: Path) -> list[RunInfo]:
    """Every run record under ``root`` (any folder with a summary.json), sorted by path."""
    runs = []
    for path in sorted(Path(root).rglob("summary.json")):
        folder = path.parent
        summary = json.loads(path.read_text())
        arm_file = folder / "arm.json"
        arm = json.loads(arm_file.read_text())["arm"] if arm_file.is_file() else technique_arm(summary)
        history = _jsonl(folder / "metrics.jsonl")
        runs.append(
            RunInfo(
                folder=folder,
                model=str(summary.get("model")),
                dataset=dataset_slug(str(summary.get("dataset"))),
                arm=arm,
                seed=summary.get("seed"),
                status=str(summary.get("status")),
                error=summary.get("error"),
                summary=summary,
                history=history,
                evals=_jsonl(folder / "evals.jsonl"),
            )
        )
    return runs


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


@dataclass
class ArmStats:
    """The completed runs of one combination, and how they compare with the baseline."""

    arm: str
    runs: list[RunInfo]
    failed: list[RunInfo] = field(default_factory=list)
    speedups: list[float] = field(default_factory=list)  # baseline time / this time, per run (fixed work)
    target_speedups: list[float] = field(default_factory=list)  # baseline / this time to target, paired by seed

    def values(self, key: str) -> list[float]:
        return [r.get(key) for r in self.runs if r.get(key) is not None]

    def median(self, key: str) -> float | None:
        values = self.values(key)
        return statistics.median(values) if values else None

    def span(self, key: str) -> tuple[float, float] | None:
        values = self.values(key)
        return (min(values), max(values)) if values else None

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def target(self) -> float | None:
        targets = {r.get("target_accuracy") for r in self.runs} - {None}
        return max(targets) if targets else None

    @property
    def reached(self) -> int:
        return sum(r.reached for r in self.runs)

    @property
    def all_reached(self) -> bool:
        return self.n > 0 and self.reached == self.n

    def chance(self) -> float | None:
        """Chance accuracy (1 / classes), from the records."""
        for r in self.runs:
            if r.get("chance_accuracy"):
                return r.get("chance_accuracy")
            if r.get("num_classes"):
                return 1.0 / r.get("num_classes")
        return None

    def near_chance(self) -> bool:
        """Median test accuracy below NEAR_CHANCE x chance: such runs learned too little for
        their accuracy to say anything (an unknown chance level counts as informative)."""
        acc, chance = self.median("test_accuracy"), self.chance()
        return acc is not None and chance is not None and acc < NEAR_CHANCE * chance

    def names(self) -> list[str]:
        return [r.folder.name for r in self.runs]

    @property
    def size(self) -> int:
        return 0 if self.arm == BASELINE else self.arm.count("+") + 1


Groups = dict[tuple[str, str], dict[str, ArmStats]]


def group_runs(runs: list[RunInfo]) -> Groups:
    """{(model, dataset): {arm: stats}}, arms ordered baseline first, then by size."""
    groups: Groups = {}
    for run in runs:
        arms = groups.setdefault((run.model, run.dataset), {})
        stats = arms.setdefault(run.arm, ArmStats(run.arm, []))
        (stats.runs if run.status == "completed" else stats.failed).append(run)
    for key, arms in groups.items():
        ordered = sorted(arms.values(), key=lambda a: (a.size, a.arm != BASELINE))
        groups[key] = {a.arm: a for a in ordered}
        _pair_speedups(groups[key])
    return groups


def _pair_speedups(arms: dict[str, ArmStats]) -> None:
    base = arms.get(BASELINE)
    if base is None or not base.runs:
        return
    by_seed = {r.seed: r.get("train_time_s") for r in base.runs}
    fallback = base.median("train_time_s")
    for stats in arms.values():
        stats.speedups = [
            by_seed.get(r.seed, fallback) / r.get("train_time_s") for r in stats.runs if r.get("train_time_s")
        ]
    if not base.all_reached:
        return  # a baseline that missed the target in some seed gives no time-to-target speed-up
    base_ttt = {r.seed: r.get("time_to_target_s") for r in base.runs}
    for stats in arms.values():
        if stats.all_reached and all(r.seed in base_ttt for r in stats.runs):
            stats.target_speedups = [base_ttt[r.seed] / r.get("time_to_target_s") for r in stats.runs]


def compare_spans(a: tuple[float, float] | None, b: tuple[float, float] | None, n_a: int, n_b: int) -> int:
    """+1 if every value of ``a`` is above every value of ``b``, -1 if below, 0 if the
    repeats overlap or either side has fewer than two runs (not resolved)."""
    if a is None or b is None or n_a < 2 or n_b < 2:
        return 0
    if a[0] > b[1]:
        return 1
    if a[1] < b[0]:
        return -1
    return 0
