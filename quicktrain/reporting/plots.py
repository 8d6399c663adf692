"""PNG plots of grouped run records (matplotlib, no display needed)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from quicktrain.atomic import atomic_write
from quicktrain.reporting.runs import BASELINE, Groups


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(plt, n: int, width: float = 5.0, height: float = 3.6):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))
    import matplotlib.pyplot as plt

    plt.close(fig)  # pyplot keeps every figure open otherwise
    return path


def _speedups(arm) -> tuple[list[float], bool]:
    """Time-to-target speed-ups (paired by seed) when the arm has them, else per fixed work."""
    return (arm.target_speedups, True) if arm.target_speedups else (arm.speedups, False)


def speedup_bars(groups: Groups, path: Path) -> Path | None:
    """Median speed-up over baseline per combination, whiskers min..max over seeds: time to the
    target paired by seed where every seed of both reached it, else per fixed work (hatched)."""
    keyed = [(k, arms) for k, arms in groups.items() if BASELINE in arms and arms[BASELINE].runs]
    if not keyed:
        return None
    plt = _pyplot()
    fig, axes = _grid(plt, len(keyed))
    for ax, ((model, dataset), arms) in zip(axes, keyed):
        shown = [(a, *_speedups(a)) for a in arms.values() if _speedups(a)[0]]
        mids = [statistics.median(v) for _, v, _ in shown]
        lows = [m - min(v) for m, (_, v, _) in zip(mids, shown)]
        highs = [max(v) - m for m, (_, v, _) in zip(mids, shown)]
        colors = ["tab:green" if m >= 1 else "tab:red" for m in mids]
        bars = ax.bar(range(len(shown)), mids, yerr=[lows, highs], color=colors, capsize=3)
        for bar, (_, _, to_target) in zip(bars, shown):
            bar.set_hatch("" if to_target else "//")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(shown)), [a.arm for a, _, _ in shown], rotation=45, ha="right", fontsize=8)
        measure = {True: "time to target", False: "fixed work"}
        kinds = sorted({measure[t] for _, _, t in shown})
        ax.set_ylabel(f"speed-up over baseline ({', '.join(kinds)})", fontsize=8)
        ax.set_title(f"{model} / {dataset}: median, min-max over seeds", fontsize=9)
    return _save(fig, path)


def tradeoff(groups: Groups, path: Path) -> Path | None:
    """Test accuracy against training time (RQ2): one small point per run, the median of each
    combination as a large marker, one colour per model."""
    datasets = sorted({d for _, d in groups})
    if not datasets:
        return None
    plt = _pyplot()
    fig, axes = _grid(plt, len(datasets), width=6.0, height=4.5)
    for ax, dataset in zip(axes, datasets):
        for index, ((model, d), arms) in enumerate(sorted(groups.items())):
            if d != dataset:
                continue
            color = f"C{index % 10}"
            done = [a for a in arms.values() if a.runs and a.median("test_accuracy") is not None]
            for a in done:
                runs = [r for r in a.runs if r.get("test_accuracy") is not None and r.get("train_time_s")]
                marker = "o" if a.arm == BASELINE else "^"
                ax.scatter([r.get("train_time_s") for r in runs], [r.get("test_accuracy") for r in runs],
                           s=12, color=color, alpha=0.45, marker=marker)  # fmt: skip
                x, y = a.median("train_time_s"), a.median("test_accuracy")
                ax.scatter([x], [y], s=90, color=color, marker=marker, edgecolors="black",
                           label=f"{model} {a.arm} (median)")  # fmt: skip
        ax.set_xlabel("training time, s (evaluation excluded)")
        ax.set_ylabel("final test accuracy")
        ax.set_title(f"{dataset}: one small point per run, large = median", fontsize=9)
        ax.legend(fontsize=7)
    return _save(fig, path)


def _curve(run) -> tuple[list[float], list[float]]:
    """(training seconds, test accuracy) at each evaluation of a run; from its epoch rows when it
    has no evaluation rows (older records)."""
    rows = [r for r in run.evals if "test_accuracy" in r and "train_time_s" in r]
    if rows:
        return [r["train_time_s"] for r in rows], [r["test_accuracy"] for r in rows]
    xs, ys, clock = [], [], 0.0
    for row in run.history:
        clock += row.get("epoch_time_s") or 0.0
        if "test_accuracy" in row:
            xs.append(clock)
            ys.append(row["test_accuracy"])
    return xs, ys


def accuracy_curves(groups: Groups, path: Path) -> Path | None:
    """Test accuracy against training time, one line per run (seed), one colour per combination,
    the target dashed: MLPerf's picture, where a faster arm reaches the line further left."""
    keyed = [(k, arms) for k, arms in groups.items() if any(_curve(r)[0] for a in arms.values() for r in a.runs)]
    if not keyed:
        return None
    plt = _pyplot()
    fig, axes = _grid(plt, len(keyed))
    for ax, ((model, dataset), arms) in zip(axes, keyed):
        for index, arm in enumerate(arms.values()):
            for n, run in enumerate(arm.runs):
                xs, ys = _curve(run)
                ax.plot(xs, ys, color=f"C{index % 10}", linewidth=1, alpha=0.8, label=arm.arm if n == 0 else None)
        targets = {a.target for a in arms.values()} - {None}
        for target in targets:
            ax.axhline(target, color="black", linestyle="--", linewidth=0.8)
        ax.set_xlabel("training time, s (evaluation excluded)")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{model} / {dataset}" + (" (dashed: target)" if targets else ""), fontsize=10)
        ax.legend(fontsize=7)
    return _save(fig, path)
