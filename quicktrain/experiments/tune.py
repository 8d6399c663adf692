"""``quicktrain tune``: an Optuna study whose trials are quicktrain training runs.

Trials train on the training split minus a class-balanced validation split
(``data.val_fraction``) and are scored on it; the test split is not even loaded
(``data.load_test=false``), so tuning cannot leak into the accuracy reported later.
Each epoch's validation score goes to the pruner. The study lives in an Optuna storage
(default ``sqlite:///OUT/study.db``): re-running the same command continues it, and
several workers given one RDB URL (e.g. PostgreSQL) share it. ``--trials N`` is the total
number of finished trials (completed, pruned or failed) the study should reach.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quicktrain.atomic import atomic_write_text
from quicktrain.config import Config
from quicktrain.engine.trainer import train
from quicktrain.errors import ConfigError, RunStopped
from quicktrain.experiments.space import overrides

log = logging.getLogger("quicktrain")

METRICS = ("accuracy", "f1_macro")
PRUNERS = ("median", "halving", "none")
DEFAULT_VAL_FRACTION = 0.1


@dataclass(frozen=True)
class TuneSpec:
    base: Config
    trials: int
    study: str
    storage: str | None  # None: sqlite:///OUT/study.db
    out: Path
    space: dict[str, dict[str, Any]]
    metric: str = "accuracy"
    pruner: str = "median"

    def check(self) -> None:
        if self.trials < 1:
            raise ConfigError(f"--trials must be at least 1, got {self.trials}")
        if self.metric not in METRICS:
            raise ConfigError(f"--metric '{self.metric}' is not accepted; use {' or '.join(METRICS)}")
        if self.pruner not in PRUNERS:
            raise ConfigError(f"--pruner '{self.pruner}' is not accepted; use {', '.join(PRUNERS)}")

    @property
    def storage_url(self) -> str:
        return self.storage or f"sqlite:///{(self.out / 'study.db').resolve()}"

    @property
    def val_fraction(self) -> float:
        return self.base.data.val_fraction or DEFAULT_VAL_FRACTION

    def trial_config(self, params: dict[str, Any], folder: Path) -> Config:
        """The training config of one trial: the base, the sampled values, scored on validation."""
        fixed = {
            "data.val_fraction": self.val_fraction,
            "data.load_test": False,
            "run.out": str(folder),
            "run.resume": None,
            "run.target_accuracy": None,
            "run.progress": False,
        }
        return Config.from_overrides({**params, **fixed}, self.base)


def _pruner(name: str) -> Any:
    import optuna

    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.NopPruner()


def require_optuna() -> None:
    """One line naming the extra when Optuna is missing (it is optional: ``quicktrain[tune]``)."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise ConfigError("quicktrain tune needs Optuna: pip install 'quicktrain[tune]'") from None


def open_study(spec: TuneSpec) -> Any:
    import optuna

    spec.out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # heartbeats are marked experimental since Optuna 2.9
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = optuna.storages.RDBStorage(spec.storage_url, heartbeat_interval=10, grace_period=30)
        study = optuna.create_study(
            study_name=spec.study,
            storage=storage,
            direction="maximize",
            sampler=optuna.samplers.TPESampler(seed=spec.base.run.seed),
            pruner=_pruner(spec.pruner),
            load_if_exists=True,
        )
        optuna.storages.fail_stale_trials(study)  # trials whose worker died (no heartbeat) are failed
    return study


def finished_trials(study: Any) -> list[Any]:
    """Trials that reached an outcome: completed, pruned, or failed with a reason. A trial whose
    worker was killed is failed later by the heartbeat check, without a reason; it does not
    count, so a killed study re-run with the same --trials ends with that many outcomes."""
    return [t for t in study.get_trials(deepcopy=False) if _outcome(t) in ("COMPLETE", "PRUNED", "FAIL")]


def _outcome(trial: Any) -> str:
    state = trial.state.name
    if state == "FAIL" and "error" not in trial.user_attrs:
        return "INTERRUPTED"
    return state


def run_tune(spec: TuneSpec, argv: Sequence[str] = ()) -> Path:
    """Run (or continue) the study until it holds ``spec.trials`` finished trials; write the
    trials table, ``best.yaml`` and plots; return the output folder."""
    require_optuna()
    import optuna

    spec.check()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(spec)
    manifest = {
        "command": " ".join(["quicktrain", "tune", *argv]),
        "study": spec.study,
        "storage": spec.storage_url,
        "metric": f"val_{spec.metric}",
        "val_fraction": spec.val_fraction,
        "pruner": spec.pruner,
        "space": spec.space,
        "base_config": spec.base.to_dict(),
    }
    atomic_write_text(spec.out / "tune.json", json.dumps(manifest, indent=2) + "\n")
    done = len(finished_trials(study))
    log.info(
        f"tune: study '{spec.study}' in {spec.storage_url}: {done} of {spec.trials} trials finished; "
        f"objective val_{spec.metric} on a {spec.val_fraction:.0%} validation split (test split not loaded)"
    )
    try:
        if done < spec.trials:

            def enough(study: Any, trial: Any) -> None:  # other workers may be adding trials too
                if len(finished_trials(study)) >= spec.trials:
                    study.stop()

            study.optimize(
                lambda trial: _objective(spec, trial),
                n_trials=spec.trials - done,
                callbacks=[enough],
                catch=(Exception,),  # a failed trial is recorded as failed; the study goes on
            )
    finally:
        write_outputs(spec, study)
    return spec.out


def _objective(spec: TuneSpec, trial: Any) -> float:
    import optuna

    folder = spec.out / "trials" / f"trial_{trial.number:04d}"
    trial.set_user_attr("run", str(folder))
    started = time.perf_counter()
    params = overrides(trial, spec.space)
    key = f"val_{spec.metric}"

    epochs = spec.base.run.epochs

    def report(row: dict[str, Any]) -> None:
        if key not in row:  # an epoch that run.eval_every did not evaluate
            return
        trial.report(row[key], row["epoch"])
        if row["epoch"] < epochs and trial.should_prune():  # a finished trial keeps its score
            raise RunStopped(f"pruned after epoch {row['epoch']}: {key} {row[key]:.4f}", status="pruned")

    try:
        with _quiet():
            result = train(spec.trial_config(params, folder), on_epoch=report)
    except Exception as err:
        reason = f"{type(err).__name__}: {' '.join(str(err).split())}"
        trial.set_user_attr("error", reason)
        log.info(f"  trial {trial.number}: failed: {reason}")
        raise
    took = time.perf_counter() - started
    summary = result.summary
    shown = ", ".join(f"{k.split('.')[-1]}={_short(v)}" for k, v in params.items())
    if summary["status"] == "pruned":
        log.info(f"  trial {trial.number}: {summary['error']} ({shown}; {took:.0f}s)")
        raise optuna.TrialPruned(summary["error"])
    log.info(f"  trial {trial.number}: {key} {summary[key]:.4f} ({shown}; {took:.0f}s)")
    return summary[key]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """One line per trial instead of each run's banner; a pruned trial is not an Ignite error."""
    ignite = logging.getLogger("ignite")
    levels = log.level, ignite.level
    log.setLevel(logging.WARNING)
    ignite.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(levels[0])
        ignite.setLevel(levels[1])


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def best_config(spec: TuneSpec, study: Any) -> Config | None:
    """The base config with the best trial's values (the user's own val_fraction/test setting)."""
    import optuna

    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if not complete:
        return None
    best = max(complete, key=lambda t: t.value)
    return Config.from_overrides(overrides(optuna.trial.FixedTrial(best.params), spec.space), spec.base)


def write_outputs(spec: TuneSpec, study: Any) -> None:
    from quicktrain.experiments.tune_plots import plot_history, plot_importances

    trials = study.get_trials(deepcopy=False)
    atomic_write_text(spec.out / "trials.csv", _trials_csv(trials))
    cfg = best_config(spec, study)
    if cfg is not None:
        best = max((t for t in trials if t.state.name == "COMPLETE"), key=lambda t: t.value)
        header = (
            f"# best of study '{spec.study}': trial {best.number}, val_{spec.metric} {best.value:.4f}\n"
            f"# run: quicktrain train --config {spec.out / 'best.yaml'}\n"
            "# (trains on the whole training split unless data.val_fraction is set, and reports the test split,\n"
            "#  which tuning never loaded)\n"
        )
        atomic_write_text(spec.out / "best.yaml", header + cfg.to_yaml())
    plot_history(trials, spec.out / "history.png", f"val_{spec.metric}")
    plot_importances(study, spec.out / "importances.png")


def _trials_csv(trials: list[Any]) -> str:
    names = sorted({p for t in trials for p in t.params})
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["number", "state", "value", "duration_s", *names, "run", "error"])
    for t in trials:
        duration = t.duration.total_seconds() if t.duration else None
        row = [t.number, _outcome(t), t.value, duration, *(t.params.get(n) for n in names)]
        writer.writerow([*row, t.user_attrs.get("run"), t.user_attrs.get("error")])
    return buffer.getvalue()
