"""``quicktrain report DIR``: run records -> report.md with tables, plots and findings.

Example:
    >>> from quicktrain.reporting.report import write_report
    >>> path = write_report("runs/ablation")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import statistics
from datetime import datetime
from pathlib import Path

from quicktrain.atomic import atomic_write_text
from quicktrain.errors import ConfigError
from quicktrain.reporting.findings import accuracy_verdict, findings, target_mode
from quicktrain.reporting.plots import accuracy_curves, speedup_bars, tradeoff
from quicktrain.reporting.runs import BASELINE, ArmStats, Groups, group_runs, load_runs, mlperf_mean

COLUMNS = (
    "combination", "runs", "train time s (median)", "speed-up per fixed work", "images/s",
    "test acc median [min-max]", "macro-F1", "acc vs baseline",
)  # fmt: skip
TARGET_COLUMNS = (
    "combination", "runs", "reached target", "time to target s median [min-max]", "MLPerf mean s",
    "speed-up to target (paired)", "updates to target", "test acc median [min-max]", "macro-F1", "acc vs baseline",
    "train time s", "images/s",
)  # fmt: skip
RULES = (
    "Rules: with a target, a speed-up is the baseline's time to the target over the combination's, paired by seed, "
    "given only when every seed of both reached the target; the MLPerf mean (5 or more seeds) drops the fastest and "
    "the slowest run and averages the rest. Without a target, speed-ups are per fixed number of epochs and say "
    "nothing about accuracy. Runs whose median accuracy is below 1.5x chance are 'near chance': their accuracy is "
    "not informative. 'No accuracy loss' needs 3 or more seeds per side and a drop within both the tolerance and the "
    "seed-to-seed spread."
)


def write_report(root: str | Path, out: str | Path | None = None, tolerance: float = 0.01) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"report folder '{root}' does not exist")
    if not 0 <= tolerance < 1:
        raise ConfigError(f"--tolerance must be in [0, 1), got {tolerance}")
    runs = load_runs(root)
    if not runs:
        raise ConfigError(f"no run records (folders with summary.json) under '{root}'")
    out = Path(out) if out else root
    out.mkdir(parents=True, exist_ok=True)
    groups = group_runs(runs)
    plots = [
        (
            "Speed-up over the baseline: time to the target paired by seed where every seed of both reached it, "
            "else per fixed work (hatched); bars are medians, whiskers min-max over seeds",
            speedup_bars(groups, out / "speedup.png"),
        ),
        ("Final accuracy against training time, one point per run (RQ2)", tradeoff(groups, out / "tradeoff.png")),
        (
            "Test accuracy against training time, one line per seed, the target dashed",
            accuracy_curves(groups, out / "curves.png"),
        ),
    ]
    parts = [_header(root, runs, groups)]
    datasets = sorted({dataset for _, dataset in groups})
    if len(groups) > 1:  # several models or datasets: one table per dataset, models side by side (RQ2, RQ4)
        for dataset in datasets:
            chosen = {model: arms for (model, d), arms in groups.items() if d == dataset}
            parts.append(f"## Models on {dataset}\n\n{_models_table(chosen, tolerance)}")
    for key, arms in groups.items():
        parts.append(f"## {key[0]} on {key[1]}\n\n{_table(arms)}")
    parts.append("## Plots\n\n" + "\n\n".join(f"{title}\n\n![{p.stem}]({p.name})" for title, p in plots if p))
    parts.append("## Findings\n\n" + findings(groups, tolerance))
    failed = [r for r in runs if r.status != "completed"]
    if failed:
        rows = "\n".join(f"- `{r.folder.name}` ({r.arm}): {r.status}: {r.error}" for r in failed)
        parts.append(f"## Runs that did not complete\n\n{rows}")
    path = out / "report.md"
    atomic_write_text(path, "\n\n".join(parts) + "\n")
    return path


def _header(root: Path, runs: list, groups: Groups) -> str:
    lines = [f"# quicktrain report: {root}", ""]
    manifest = root / "ablation.json"
    if manifest.is_file():
        lines.append(f"Produced by: `{json.loads(manifest.read_text())['command']}`")
        lines.append("")
    done = sum(r.status == "completed" for r in runs)
    devices = sorted({str(r.get("device")) for r in runs if r.get("device")})
    lines.append(
        f"{len(runs)} run records ({done} completed) in {len(groups)} model/dataset groups; "
        f"device: {', '.join(devices) or 'unknown'}; written {datetime.now().isoformat(timespec='seconds')}."
    )
    lines.append(
        "Times are training time only (evaluation excluded). Speed-up = baseline time / combination time, "
        "paired by seed; accuracy and macro-F1 are on the held-out test split."
    )
    lines.append("")
    lines.append(RULES)
    return "\n".join(lines)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _spread(values: list[float], spec: str, unit: str = "") -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):{spec}}{unit} [{min(values):{spec}}-{max(values):{spec}}]"


MODEL_COLUMNS = (
    "model", "arm", "seeds", "time to target s median [min-max]", "speed-up to target (paired)",
    "final test acc median [min-max]", "macro-F1", "accuracy against the baseline",
)  # fmt: skip


def _models_table(models: dict[str, dict[str, ArmStats]], tolerance: float) -> str:
    """Every model and arm on one dataset: the time to target, the paired speed-up, the final
    accuracy and the no-loss verdict, so families compare at a glance."""
    rows = []
    for model, arms in sorted(models.items()):
        base = arms.get(BASELINE)
        for arm in arms.values():
            ttt = arm.values("time_to_target_s")
            reached = "" if arm.all_reached or not arm.target else f" ({arm.reached} of {arm.n} reached)"
            speedup = _spread(arm.target_speedups, ".2f", "x") if arm.target_speedups else "-"
            verdict = "-" if arm.arm == BASELINE or base is None else accuracy_verdict(arm, base, tolerance).text
            rows.append([model, arm.arm, str(arm.n), _spread(ttt, ".1f") + reached, speedup,
                         _spread(arm.values("test_accuracy"), ".4f"), _fmt(arm.median("test_f1_macro"), ".4f"),
                         verdict])  # fmt: skip
    head = "| " + " | ".join(MODEL_COLUMNS) + " |\n|" + "---|" * len(MODEL_COLUMNS)
    return head + "\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows)


def _table(arms: dict[str, ArmStats]) -> str:
    base = arms.get(BASELINE)
    base_acc = base.median("test_accuracy") if base and base.runs else None
    with_target = target_mode(arms)
    rows = []
    for arm in arms.values():
        acc = arm.median("test_accuracy")
        delta = f"{100 * (acc - base_acc):+.1f} pts" if acc is not None and base_acc is not None else "-"
        runs = f"{arm.n}" + (f" (+{len(arm.failed)} failed)" if arm.failed else "")
        accuracy = [_spread(arm.values("test_accuracy"), ".4f"), _fmt(arm.median("test_f1_macro"), ".4f"), delta]
        speed = [_fmt(arm.median("train_time_s"), ".1f"), _fmt(arm.median("images_per_s"), ".1f")]
        if with_target:
            ttt = arm.values("time_to_target_s")
            speedup = _spread(arm.target_speedups, ".2f", "x") if arm.target_speedups else "-"
            reached = f"{arm.reached} of {arm.n}"
            row = [arm.arm, runs, reached, _spread(ttt, ".1f"), _fmt(mlperf_mean(ttt), ".1f"), speedup]
            rows.append([*row, _fmt(arm.median("updates_to_target"), ".0f"), *accuracy, *speed])
        else:
            speedup = _spread(arm.speedups, ".2f", "x") if arm.speedups else "-"
            rows.append([arm.arm, runs, speed[0], speedup, speed[1], *accuracy])
    columns = TARGET_COLUMNS if with_target else COLUMNS
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns)
    chance = next((a.chance() for a in arms.values() if a.chance()), None)
    target = next((a.target for a in arms.values() if a.target is not None), None)
    notes = [f"chance accuracy {chance:.3f}" if chance else None, f"target accuracy {target:g}" if target else None]
    said = "; ".join(n for n in notes if n)
    return (
        head
        + "\n"
        + "\n".join("| " + " | ".join(r) + " |" for r in rows)
        + (f"\n\n{said.capitalize()}." if said else "")
    )
