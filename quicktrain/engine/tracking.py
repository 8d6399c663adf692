"""Experiment trackers beside the run record: TensorBoard (event files in the run folder) and
MLflow (``--mlflow [URI]``, default a local ``mlruns/`` file store), both through Ignite's
loggers: the training loss and learning rate every 10 updates, every epoch's metrics row, and
for MLflow the resolved config as params and the run record's files as artifacts at the end.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from ignite.engine import Engine, Events

from quicktrain.errors import ConfigError

EVERY = 10  # updates between two logged training losses (reading the loss syncs the device)


def attach_tensorboard(trainer: Engine, optimizer: torch.optim.Optimizer, folder: Path) -> Callable[[], None]:
    from ignite.handlers.tensorboard_logger import TensorboardLogger

    tb = TensorboardLogger(log_dir=str(folder))
    _attach_scalars(tb, trainer, optimizer)
    return tb.close


class MlflowTracker:
    """An MLflow run that mirrors the TensorBoard scalars; :meth:`finish` adds the run record's
    files as artifacts (after summary.json is written) and ends the MLflow run."""

    def __init__(self, uri: str, trainer: Engine, optimizer: torch.optim.Optimizer, params: dict[str, Any]) -> None:
        try:
            from ignite.handlers.mlflow_logger import MLflowLogger
        except (ImportError, ModuleNotFoundError, RuntimeError):
            raise ConfigError("run.mlflow needs MLflow: pip install 'quicktrain[mlflow]'") from None
        if "://" not in uri:  # a plain folder: MLflow's local file store, which MLflow 3 asks to opt into
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = Path(uri).resolve().as_uri()
        try:
            self.logger = MLflowLogger(tracking_uri=uri)
        except Exception as err:  # MLflow raises its own types for unusable stores
            raise ConfigError(f"run.mlflow={uri!r} cannot be used: {' '.join(str(err).split())[:300]}") from None
        self.logger.log_params({k: v for k, v in params.items() if v is not None})
        _attach_scalars(self.logger, trainer, optimizer)
        self.closed = False

    def finish(self, folder: Path) -> None:
        if self.closed:
            return
        import mlflow

        for name in ("summary.json", "config.yaml", "env.json", "metrics.jsonl", "evals.jsonl"):
            if (folder / name).is_file():
                mlflow.log_artifact(str(folder / name))
        self.logger.close()
        self.closed = True


def _attach_scalars(logger: Any, trainer: Engine, optimizer: torch.optim.Optimizer) -> None:
    every = Events.ITERATION_COMPLETED(every=EVERY)
    logger.attach_output_handler(
        trainer, event_name=every, tag="train", output_transform=lambda out: {"loss": out.loss}
    )
    logger.attach_opt_params_handler(trainer, event_name=every, optimizer=optimizer)
    logger.attach_output_handler(trainer, event_name=Events.EPOCH_COMPLETED, tag="epoch", metric_names="all")


def flat_params(config: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{"optim": {"lr": 0.1}}`` -> ``{"optim.lr": 0.1}`` (MLflow params are flat)."""
    return {f"{section}.{key}": value for section, values in config.items() for key, value in values.items()}
