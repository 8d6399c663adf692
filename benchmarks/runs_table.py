"""Write the flat table a claim's records folder leads with: ``runs.csv``, one row per run.

    python benchmarks/runs_table.py benchmarks/results/NAME [--commit C]

Every ``summary.json`` below NAME is one run: its model, dataset, arm (``arm.json``'s, else the run
folder's name less a ``_sN`` seed suffix), seed, target and time to it, final held-out accuracy and
macro-F1, training images/s, the machine (``env.json``: CPU or GPU, cores, torch threads) and the
quicktrain commit (``env.json``'s ``commit`` where the run recorded one, else ``--commit``, else
empty). Rows are sorted by arm, model and seed. ``quicktrain report NAME`` reads the same folders for plots.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path
from typing import Any

COLUMNS = (
    "run",
    "model",
    "dataset",
    "arm",
    "seed",
    "status",
    "target_accuracy",
    "reached_target",
    "time_to_target_s",
    "test_accuracy",
    "test_f1_macro",
    "images_per_s",
    "train_time_s",
    "machine",
    "commit",
)


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def machine(env: dict[str, Any]) -> str:
    """One short description of what a run ran on, from its env.json."""
    if not env:
        return ""
    where = env.get("gpu") or env.get("cpu") or env.get("device", "")
    if not env.get("gpu") and env.get("cpu_model"):  # "AMD EPYC (x86 family 26 model 2 stepping 1)"
        where = f"{where} ({env['cpu_model']})"
    return f"{where}, {env.get('cpu_count')} cores, {env.get('torch_threads')} threads"


def _number(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def row(summary_path: Path, folder: Path, commit: str) -> dict[str, Any]:
    run = summary_path.parent
    summary, env, arm = _json(summary_path), _json(run / "env.json"), _json(run / "arm.json")
    out = {name: _number(summary.get(name)) for name in COLUMNS}
    out.update(
        run=str(run.relative_to(folder)) if run != folder else ".",
        arm=arm.get("arm") or re.sub(r"[-_]s\d+$", "", run.name),  # "jitter_s2": arm "jitter"
        machine=machine(env),
        commit=env.get("commit") or commit,
    )
    return out


def table(folder: Path, commit: str = "") -> list[dict[str, Any]]:
    rows = [row(path, folder, commit) for path in sorted(folder.rglob("summary.json"))]
    return sorted(rows, key=lambda r: (str(r["arm"]), str(r["model"]), str(r["seed"]), r["run"]))


def write(folder: Path, commit: str = "") -> int:
    rows = table(folder, commit)
    target = folder / "runs.csv"
    with open(target.with_suffix(".csv.tmp"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    target.with_suffix(".csv.tmp").replace(target)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="benchmarks/results/NAME folders")
    parser.add_argument("--commit", default="", help="the quicktrain commit of runs whose env.json has none")
    args = parser.parse_args(argv)
    for folder in args.folders:
        if not folder.is_dir():
            print(f"error: not a folder: {folder}", file=sys.stderr)
            return 2
        print(f"{folder}/runs.csv: {write(folder, args.commit)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
