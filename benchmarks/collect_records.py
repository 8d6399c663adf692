"""Copy finished ablations' records into ``benchmarks/results/`` the way that folder keeps them.

    python benchmarks/collect_records.py SRC [SRC ...] --dest benchmarks/results/NAME [--root DIR]

Each SRC is a ``quicktrain ablate --out`` folder. Its ``ablation.csv``/``.json`` land as
``DEST/ablation-<SRC's name>.csv``/``.json``; each finished run (``summary.json`` present) lands in
``DEST/runs/<run>/`` with its record files only, never checkpoints, weights or event files. A run
linked into several ablations (a shared baseline) is copied once. Absolute paths in the copied text
are made relative: ``ROOT/`` (the checkout the measurement ran from, default the current folder)
becomes nothing, its parent ``../`` and the home folder ``~/``, as the results' README states.
Then ``quicktrain report DEST`` reads them like any run folder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

RECORD_FILES = ("arm.json", "config.yaml", "env.json", "evals.jsonl", "metrics.jsonl", "summary.csv", "summary.json")


def relative_text(text: str, root: Path) -> str:
    for absolute, short in ((root, ""), (root.parent, "../"), (Path.home(), "~/")):
        text = text.replace(f"{absolute}/", short)
    return text


def copy_text(src: Path, dest: Path, root: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(relative_text(src.read_text(), root))


def collect(sources: list[Path], dest: Path, root: Path) -> tuple[int, int]:
    """Copy the ablations' tables and finished runs; return (runs copied, runs left: unfinished)."""
    copied, unfinished = 0, 0
    for source in sources:
        for suffix in (".csv", ".json"):
            table = source / f"ablation{suffix}"
            if table.is_file():
                copy_text(table, dest / f"ablation-{source.name}{suffix}", root)
        for run in sorted((source / "runs").glob("*")):
            if not (run / "summary.json").is_file():
                unfinished += 1
                continue
            target = dest / "runs" / run.name
            if target.exists():
                continue
            for name in RECORD_FILES:
                if (run / name).is_file():
                    copy_text(run / name, target / name, root)
            copied += 1
    return copied, unfinished


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, help="quicktrain ablate --out folders")
    parser.add_argument("--dest", type=Path, required=True, help="benchmarks/results/NAME")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout the runs ran from [default: .]")
    args = parser.parse_args(argv)
    missing = [str(s) for s in args.sources if not (s / "runs").is_dir()]
    if missing:
        print(f"error: not an ablation folder (no runs/): {', '.join(missing)}", file=sys.stderr)
        return 2
    copied, unfinished = collect(args.sources, args.dest, args.root.resolve())
    print(f"{copied} runs copied to {args.dest}/runs; {unfinished} unfinished left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
