"""Run records -> per (model, dataset, technique combination) statistics.

Reads only the files a run record holds (``summary.json``, ``metrics.jsonl``, ``arm.json``
when an ablation wrote one). A combination's name lists the techniques it switched on
(``amp+ga``); the one with none is ``baseline``, and speed-ups are measured against it,
paired by seed (each repeat against the baseline of the same repeat) where possible.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicktrain.experiments.grid import TECHNIQUES, dataset_slug

BASELINE = "baseline"


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

    def get(self, key: str) -> Any:
        return self.summary.get(key)


def technique_arm(summary: dict[str, Any]) -> str:
    """The combination a run used, from what its summary says was active."""
    on = {
        "amp": summary.get("amp") not in (None, "off"),
        "ga": (summary.get("accum_steps") or 1) > 1,
        "pin": bool(summary.get("pin_memory")),
        "channels_last": bool(summary.get("channels_last")),
        "compile": bool(summary.get("compile")),
    }
    return "+".join(t for t in TECHNIQUES if on[t]) or BASELINE


def load_runs(root: Path) -> list[RunInfo]:
    """Every run record under ``root`` (any folder with a summary.json), sorted by path."""
    runs = []
    for path in sorted(Path(root).rglob("summary.json")):
        folder = path.parent
        summary = json.loads(path.read_text())
        arm_file = folder / "arm.json"
        arm = json.loads(arm_file.read_text())["arm"] if arm_file.is_file() else technique_arm(summary)
        metrics = folder / "metrics.jsonl"
        history = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()] if metrics.is_file() else []
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
            )
        )
    return runs


@dataclass
class ArmStats:
    """The completed runs of one combination, and how they compare with the baseline."""

    arm: str
    runs: list[RunInfo]
    failed: list[RunInfo] = field(default_factory=list)
    speedups: list[float] = field(default_factory=list)  # baseline time / this time, per run

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
