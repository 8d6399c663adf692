"""``train(cfg)``: build the run, prepare its folder (or resume it), drive the loop
(:mod:`quicktrain.engine.loop`) and always finish the record with a summary.

Example:
    >>> from quicktrain import Config, train
    >>> result = train(Config.from_overrides({"data.dataset": "synthetic", "model.name": "test_vit",
    ...                                       "run.epochs": 1, "run.progress": False}))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from quicktrain.atomic import atomic_write
from quicktrain.config import Config
from quicktrain.engine.banner import describe
from quicktrain.engine.checkpoint import restore
from quicktrain.engine.environment import environment
from quicktrain.engine.loop import EpochHook, Loop
from quicktrain.engine.run_folder import prepare_folder
from quicktrain.engine.setup import build_run
from quicktrain.engine.summary import build_summary
from quicktrain.errors import ConfigError, EnvironmentFault, RunStopped
from quicktrain.metrics import reset_peak_memory
from quicktrain.records import RunRecord
from quicktrain.techniques.base import unwrap

log = logging.getLogger("quicktrain")


@dataclass
class RunResult:
    folder: Path
    summary: dict[str, Any]
    history: list[dict[str, Any]]
    main: bool = True  # False on data-parallel ranks other than 0, which write and report nothing


def train(
    cfg: Config,
    on_epoch: EpochHook | None = None,
    *,
    model: nn.Module | None = None,
    train_data: Any | None = None,
    test_data: Any | None = None,
) -> RunResult:
    """Train as ``cfg`` says and write a complete run record; return the summary.

    ``model`` (any ``nn.Module``, trained in place) and ``train_data`` / ``test_data``
    (map-style datasets of ``(image, int label)``; see :mod:`quicktrain.data.objects`) replace
    the model and dataset the config names; every technique, checkpoint and resume applies.
    The record names them ``object:<class>``. To resume such a run, pass the same objects.

    ``on_epoch(row)`` is called with each epoch's metrics row once it is recorded and
    checkpointed; it may raise :class:`RunStopped` to end the run early (e.g. a pruned
    tuning trial): the record then says the exception's status, and ``train`` returns.
    SIGTERM (and a first Ctrl-C) finish the current update, write a checkpoint and return
    with status ``interrupted``."""
    wall_start = time.perf_counter()
    if test_data is not None and train_data is None:
        raise ConfigError("test_data needs train_data too")
    objects = {}
    if model is not None:
        objects["model.name"] = f"object:{type(model).__name__}"
    if train_data is not None:
        objects.update({"data.dataset": f"object:{type(train_data).__name__}", "data.load_test": test_data is not None})
    cfg = Config.from_overrides(objects, cfg) if objects else cfg
    data = (train_data, test_data) if train_data is not None else None
    run = build_run(cfg, progress=cfg.run.progress, model=model, data=data)
    main = run.techniques.distributed.is_main
    folder, ckpt = prepare_folder(cfg, create=main)
    record = RunRecord(folder, enabled=main)
    if ckpt is not None:
        restore(run.state, ckpt)
        run.completed = run.state.counters.snapshot()
        record.truncate(run.state.counters.epoch, run.state.counters.num_updates)
    position = ckpt["position"] if ckpt is not None else {"epoch": 0, "batch": 0}
    record.write_config(cfg.to_yaml())
    record.write_env(environment(run.device))
    for line in describe(run):
        log.info(line)
    log.info(f"  run record    {folder}")
    if ckpt is not None:
        log.info(f"resuming at epoch {position['epoch'] + 1}, batch {position['batch']} from {ckpt['path']}")

    wall_base = run.state.counters.wall_time_s  # earlier processes of this run

    def wall_time() -> float:
        return wall_base + time.perf_counter() - wall_start

    stop = StopRequest()
    loop = Loop(run, record, folder, wall_time, on_epoch, lambda: stop.signal, position)
    reset_peak_memory(run.device)
    status, error = "completed", None
    try:
        with stop.installed():
            if run.state.counters.epoch < cfg.run.epochs:
                loop.trainer.run(run.train_loader, max_epochs=cfg.run.epochs)
        if loop.stopped_by == "signal":
            status, error = (
                "interrupted",
                f"{stop.signal or 'SIGTERM'}: checkpoint written after update {run.state.counters.num_updates}",
            )
            log.warning(f"{stop.signal}: stopped after a checkpoint; continue with: {resume_hint(folder)}")
    except RunStopped as stopped:
        status, error = stopped.status, str(stopped)
    except KeyboardInterrupt:
        status, error = "interrupted", "KeyboardInterrupt"
        log.warning(f"interrupted; continue from the last checkpoint with: {resume_hint(folder)}")
        raise
    except Exception as err:
        status, error = "failed", f"{type(err).__name__}: {err}"
        raise
    finally:
        for cleanup in loop.cleanups:
            cleanup()
        history = record.read_metrics()
        summary = build_summary(
            run, record.read_evals(), wall_time(), status, error, loop.stopped_by, loop.last_confusion
        )
        if status == "completed" and main:
            weights = unwrap(run.techniques.scored_model(run.state.model)).state_dict()  # the EMA, if kept
            atomic_write(folder / "model.pt", lambda f: torch.save(weights, f))
        try:
            record.write_summary(summary)
        except EnvironmentFault as fault:  # the disk that failed the run may refuse the summary too
            log.error(f"the run's summary could not be written: {fault}")
        for tracker in loop.trackers:  # e.g. the record's files as artifacts, once they are complete
            try:
                tracker.finish(folder)
            finally:
                tracker.close()
        # DDP's reducer holds the process group: release the wrapper, then everything that can reach
        # it (the loop and its Ignite engines, the optimizer's hooks), and check it is gone before the
        # group is destroyed, so the group's threads end here rather than at interpreter exit
        wrapper = weakref.ref(run.state.model)
        run.state.model = unwrap(run.state.model)
        del loop
        gc.collect()
        if run.techniques.distributed.active and wrapper() is not None:
            log.warning("the DDP wrapper is still referenced at the end of the run; leaving the group anyway")
        run.techniques.distributed.close(clean=status == "completed")
        run.techniques.restore_process()  # TF32, cudnn.benchmark: the caller's process as it was
    return RunResult(folder, summary, history, main)


def resume_hint(folder: Path) -> str:
    return f"quicktrain train --out {folder} --resume auto"


class StopRequest:
    """SIGTERM/SIGINT while training: remember it; the loop stops after the current update."""

    def __init__(self) -> None:
        self.signal: str | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers can only be set from the main thread
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def handle(signum: int, frame: object) -> None:
            self.signal = signal.Signals(signum).name
            signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C stops at once

        for sig in previous:
            signal.signal(sig, handle)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


__all__ = ["RunResult", "train"]
