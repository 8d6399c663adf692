"""PNG plots of an Optuna study: optimisation history and parameter importances."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from quicktrain.atomic import atomic_write

log = logging.getLogger("quicktrain")


def _figure(width: float, height: float) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, height))


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))
    import matplotlib.pyplot as plt

    plt.close(fig)  # pyplot keeps every figure open otherwise


def plot_history(trials: list[Any], path: Path, metric: str) -> Path | None:
    """Each completed trial's score, the best so far, and pruned trials at their last report."""
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    pruned = [t for t in trials if t.state.name == "PRUNED" and t.intermediate_values]
    if not complete and not pruned:
        return None
    fig, ax = _figure(6.5, 4.0)
    ax.scatter([t.number for t in complete], [t.value for t in complete], label="completed")
    if pruned:
        last = [t.intermediate_values[max(t.intermediate_values)] for t in pruned]
        ax.scatter([t.number for t in pruned], last, marker="x", color="grey", label="pruned (last report)")
    best, xs, ys = float("-inf"), [], []
    for t in sorted(complete, key=lambda t: t.number):
        best = max(best, t.value)
        xs.append(t.number)
        ys.append(best)
    ax.step(xs, ys, where="post", color="tab:red", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel(metric)
    ax.legend(fontsize=8)
    _save(fig, path)
    return path


def plot_importances(study: Any, path: Path) -> Path | None:
    """Importances by Optuna's default evaluator; needs a few completed trials that differ."""
    import warnings

    import optuna

    try:
        with warnings.catch_warnings():  # "few trials per regime": true of any small study
            warnings.simplefilter("ignore")
            importances = optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError) as err:  # too few completed trials, or all alike
        log.info(f"tune: no importance plot ({err})")
        return None
    if not importances:
        return None
    fig, ax = _figure(6.5, 0.5 + 0.4 * len(importances))
    names = list(importances)[::-1]
    ax.barh(names, [importances[n] for n in names])
    ax.set_xlabel("importance (Optuna's default evaluator)")
    _save(fig, path)
    return path
