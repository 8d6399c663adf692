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


def speedup_bars(groups: Groups, path: Path) -> Path | None:
    """Median speed-up over baseline per combination, whiskers min..max over repeats."""
    keyed = [(k, arms) for k, arms in groups.items() if BASELINE in arms and arms[BASELINE].runs]
    if not keyed:
        return None
    plt = _pyplot()
    fig, axes = _grid(plt, len(keyed))
    for ax, ((model, dataset), arms) in zip(axes, keyed):
        shown = [a for a in arms.values() if a.speedups]
        mids = [statistics.median(a.speedups) for a in shown]
        lows = [m - min(a.speedups) for m, a in zip(mids, shown)]
        highs = [max(a.speedups) - m for m, a in zip(mids, shown)]
        colors = ["tab:green" if m >= 1 else "tab:red" for m in mids]
        ax.bar(range(len(shown)), mids, yerr=[lows, highs], color=colors, capsize=3)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(shown)), [a.arm for a in shown], rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("speed-up over baseline")
        ax.set_title(f"{model} / {dataset}", fontsize=10)
    return _save(fig, path)


def tradeoff(groups: Groups, path: Path) -> Path | None:
    """Test accuracy against training time: one colour per model, one point per combination."""
    datasets = sorted({d for _, d in groups})
    if not datasets:
        return None
    plt = _pyplot()
    fig, axes = _grid(plt, len(datasets), width=6.0, height=4.5)
    for ax, dataset in zip(axes, datasets):
        for (model, d), arms in groups.items():
            if d != dataset:
                continue
            done = [a for a in arms.values() if a.runs and a.median("test_accuracy") is not None]
            xs = [a.median("train_time_s") for a in done]
            ys = [a.median("test_accuracy") for a in done]
            ax.scatter(xs, ys, label=model, s=24)
            for x, y, a in zip(xs, ys, done):
                if a.arm == BASELINE or a.size == max(b.size for b in done):
                    ax.annotate(a.arm, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel("training time, s (median)")
        ax.set_ylabel("test accuracy (median)")
        ax.set_title(dataset, fontsize=10)
        ax.legend(fontsize=8)
    return _save(fig, path)


def accuracy_curves(groups: Groups, path: Path) -> Path | None:
    """Test accuracy per epoch, median over repeats, one line per combination."""
    keyed = [(k, arms) for k, arms in groups.items() if any(r.history for a in arms.values() for r in a.runs)]
    if not keyed:
        return None
    plt = _pyplot()
    fig, axes = _grid(plt, len(keyed))
    for ax, ((model, dataset), arms) in zip(axes, keyed):
        for arm in arms.values():
            per_epoch: dict[int, list[float]] = {}
            for run in arm.runs:
                for row in run.history:
                    if "test_accuracy" in row:  # epochs skipped by run.eval_every have none
                        per_epoch.setdefault(row["epoch"], []).append(row["test_accuracy"])
            if per_epoch:
                epochs = sorted(per_epoch)
                ax.plot(epochs, [statistics.median(per_epoch[e]) for e in epochs], marker="o", label=arm.arm)
        ax.set_xlabel("epoch")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{model} / {dataset}", fontsize=10)
        ax.legend(fontsize=7)
    return _save(fig, path)
