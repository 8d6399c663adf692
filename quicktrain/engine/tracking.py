"""Experiment trackers beside the run record, registered like models and datasets.

Each :class:`TrackerSpec` names the config key that turns it on and how it starts; the loop starts
every one that is on (on the main process only) and the trainer ends them after summary.json is
written. Built in, all through Ignite's loggers (the training loss and learning rate every 10
updates, every epoch's metrics row):

- ``tensorboard`` (``run.tensorboard``): event files in the run folder;
- ``mlflow`` (``--mlflow [URI]``, default a local ``mlruns/`` file store): also the resolved config
  as params and the run record's files as artifacts;
- ``wandb`` (``--log-wandb``, ``pip install 'quicktrain[wandb]'``): a Weights & Biases run in the
  run folder's ``wandb/`` (project ``$WANDB_PROJECT`` or ``quicktrain``; ``WANDB_MODE=offline``
  needs no account), the config, and the summary's scores at the end.

The record itself (metrics.jsonl, summary.csv, evals.jsonl, summary.json) is written whatever
trackers are on (:mod:`quicktrain.records`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from ignite.engine import Engine, Events

from quicktrain.config import Config
from quicktrain.errors import ConfigError

EVERY = 10  # updates between two logged training losses (reading the loss syncs the device)
RECORD_FILES = ("summary.json", "config.yaml", "env.json", "metrics.jsonl", "summary.csv", "evals.jsonl")


class Tracker:
    """A started tracker: :meth:`finish` once the record is complete, :meth:`close` always."""

    def finish(self, folder: Path) -> None:
        """The run ended and its record is written (summary.json last)."""

    def close(self) -> None:
        """Release files and connections (also after a failure)."""


@dataclass(frozen=True)
class TrackerSpec:
    name: str
    key: str  # the config key that turns it on
    start: Callable[[Config, Engine, torch.optim.Optimizer, Path], Tracker]

    def wanted(self, cfg: Config) -> bool:
        section, _, leaf = self.key.partition(".")
        return bool(getattr(getattr(cfg, section), leaf))


# ---- TensorBoard ------------------------------------------------------------------------------
class _Ignite(Tracker):
    """One of Ignite's loggers with quicktrain's scalars attached."""

    def __init__(self, logger: Any, trainer: Engine, optimizer: torch.optim.Optimizer) -> None:
        self.logger = logger
        every = Events.ITERATION_COMPLETED(every=EVERY)
        logger.attach_output_handler(
            trainer, event_name=every, tag="train", output_transform=lambda out: {"loss": out.loss}
        )
        logger.attach_opt_params_handler(trainer, event_name=every, optimizer=optimizer)
        logger.attach_output_handler(trainer, event_name=Events.EPOCH_COMPLETED, tag="epoch", metric_names="all")
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.logger.close()
            self.closed = True


def _tensorboard(cfg: Config, trainer: Engine, optimizer: torch.optim.Optimizer, folder: Path) -> Tracker:
    from ignite.handlers.tensorboard_logger import TensorboardLogger

    return _Ignite(TensorboardLogger(log_dir=str(folder)), trainer, optimizer)


# ---- MLflow -----------------------------------------------------------------------------------
class _Mlflow(_Ignite):
    def finish(self, folder: Path) -> None:
        import mlflow

        for name in RECORD_FILES:
            if (folder / name).is_file():
                mlflow.log_artifact(str(folder / name))
        self.close()


def _mlflow(cfg: Config, trainer: Engine, optimizer: torch.optim.Optimizer, folder: Path) -> Tracker:
    try:
        from ignite.handlers.mlflow_logger import MLflowLogger
    except (ImportError, ModuleNotFoundError, RuntimeError):
        raise ConfigError("run.mlflow needs MLflow: pip install 'quicktrain[mlflow]'") from None
    uri = str(cfg.run.mlflow)
    if "://" not in uri:  # a plain folder: MLflow's local file store, which MLflow 3 asks to opt into
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        uri = Path(uri).resolve().as_uri()
    try:
        logger = MLflowLogger(tracking_uri=uri)
    except Exception as err:  # MLflow raises its own types for unusable stores
        raise ConfigError(f"run.mlflow={uri!r} cannot be used: {' '.join(str(err).split())[:300]}") from None
    logger.log_params({k: v for k, v in flat_params(cfg.to_dict()).items() if v is not None})
    return _Mlflow(logger, trainer, optimizer)


# ---- Weights & Biases -------------------------------------------------------------------------
class _Wandb(_Ignite):
    def finish(self, folder: Path) -> None:
        summary = folder / "summary.json"
        if summary.is_file():
            scores = json.loads(summary.read_text())
            self.logger.run.summary.update({k: v for k, v in scores.items() if isinstance(v, (int, float, str))})
        self.close()


def _wandb(cfg: Config, trainer: Engine, optimizer: torch.optim.Optimizer, folder: Path) -> Tracker:
    try:
        import wandb  # noqa: F401 - Ignite imports it lazily; a missing one is found here
        from ignite.handlers.wandb_logger import WandBLogger
    except (ImportError, ModuleNotFoundError):
        raise ConfigError("run.log_wandb needs Weights & Biases: pip install 'quicktrain[wandb]'") from None
    project = os.environ.get("WANDB_PROJECT", "quicktrain")
    try:
        logger = WandBLogger(project=project, name=folder.name, dir=str(folder), config=cfg.to_dict(), reinit=True)
    except Exception as err:  # no login, no network: wandb raises its own types
        raise ConfigError(
            f"run.log_wandb: Weights & Biases did not start ({' '.join(str(err).split())[:200]}); log in with "
            "'wandb login', or set WANDB_MODE=offline"
        ) from None
    return _Wandb(logger, trainer, optimizer)


_TRACKERS: dict[str, TrackerSpec] = {
    s.name: s
    for s in (
        TrackerSpec("tensorboard", "run.tensorboard", _tensorboard),
        TrackerSpec("mlflow", "run.mlflow", _mlflow),
        TrackerSpec("wandb", "run.log_wandb", _wandb),
    )
}


def register_tracker(spec: TrackerSpec) -> TrackerSpec:
    """Add a tracker (a plugin's, or a test's); its name must be new."""
    if spec.name in _TRACKERS:
        raise ValueError(f"tracker '{spec.name}' is already registered")
    _TRACKERS[spec.name] = spec
    return spec


def unregister_tracker(name: str) -> None:
    if name in ("tensorboard", "mlflow", "wandb"):
        raise ValueError(f"'{name}' is built in and cannot be removed")
    _TRACKERS.pop(name, None)


def start_trackers(cfg: Config, trainer: Engine, optimizer: torch.optim.Optimizer, folder: Path) -> list[Tracker]:
    """Every registered tracker the config turns on, started (a failing one closes those before it)."""
    started: list[Tracker] = []
    try:
        for spec in _TRACKERS.values():
            if spec.wanted(cfg):
                started.append(spec.start(cfg, trainer, optimizer, folder))
    except BaseException:
        for tracker in started:
            tracker.close()
        raise
    return started


def flat_params(config: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{"optim": {"lr": 0.1}}`` -> ``{"optim.lr": 0.1}`` (MLflow params are flat)."""
    return {f"{section}.{key}": value for section, values in config.items() for key, value in values.items()}
