"""The epoch loop on PyTorch Ignite: Ignite drives :func:`train_step`; handlers around it
time, evaluate, record, checkpoint and log. Nothing here changes what a step computes.

Example:
    >>> from quicktrain import Config, train
    >>> result = train(Config.from_overrides({"data.dataset": "synthetic", "model.name": "test_vit",
    ...                                       "run.epochs": 1, "run.progress": False}))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import torch
from ignite.engine import Engine, Events

from quicktrain.atomic import atomic_write
from quicktrain.config import Config
from quicktrain.data.loader import order_fingerprint, set_epoch
from quicktrain.engine.checkpoint import (
    capture,
    find_resume,
    restore,
    resume_folder,
    save_checkpoint,
)
from quicktrain.engine.evaluate import evaluate
from quicktrain.engine.progress import attach_progress
from quicktrain.engine.setup import Run, augment_spec, build_run, describe
from quicktrain.engine.state import StepMetrics, TrainState
from quicktrain.engine.step import train_step
from quicktrain.errors import ConfigError, RunStopped, TrainingError
from quicktrain.metrics import Stopwatch, peak_memory_mb, reset_peak_memory
from quicktrain.reporting.record import RunRecord, environment
from quicktrain.techniques.layout import unwrap

log = logging.getLogger("quicktrain")

# config keys a resumed run may change: they do not alter what is computed
_RESUMABLE_CHANGES = {
    "run.out",
    "run.resume",
    "run.progress",
    "run.tensorboard",
    "run.keep_checkpoints",
    "run.checkpoint_every_steps",
    "data.workers",
    "data.cache_dir",
    "data.loader",  # the device loader yields the DataLoader path's batches
    "run.eval_every",  # evaluation only reads the model
    "run.tta",
}


@dataclass
class RunResult:
    folder: Path
    summary: dict[str, Any]
    history: list[dict[str, Any]]
    main: bool = True  # False on data-parallel ranks other than 0, which write and report nothing


EpochHook = Callable[[dict[str, Any]], None]


def train(cfg: Config, on_epoch: EpochHook | None = None) -> RunResult:
    """Train as ``cfg`` says and write a complete run record; return the summary.

    ``on_epoch(row)`` is called with each epoch's metrics row once it is recorded and
    checkpointed; it may raise :class:`RunStopped` to end the run early (e.g. a pruned
    tuning trial): the record then says the exception's status, and ``train`` returns.
    SIGTERM (and a first Ctrl-C) finish the current update, write a checkpoint and return
    with status ``interrupted``."""
    wall_start = time.perf_counter()
    run = build_run(cfg, progress=cfg.run.progress)
    main = run.techniques.distributed.is_main
    folder, ckpt = _prepare_folder(cfg, create=main)
    record = RunRecord(folder, enabled=main)
    if ckpt is not None:
        restore(run.state, ckpt)
        run.completed = run.state.counters.snapshot()
        record.truncate_metrics(run.state.counters.epoch)
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
    trainer, cleanups = _build_engine(run, record, folder, wall_time, on_epoch, stop, position)
    reset_peak_memory(run.device)
    status, error = "completed", None
    try:
        with stop.installed():
            if run.state.counters.epoch < cfg.run.epochs:
                trainer.run(run.train_loader, max_epochs=cfg.run.epochs)
        if stop.signal is not None:
            status, error = (
                "interrupted",
                f"{stop.signal}: checkpoint written after update {run.state.counters.num_updates}",
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
        for cleanup in cleanups:
            cleanup()
        history = record.read_metrics()
        summary = _summary(run, history, wall_time(), status, error)
        if status == "completed" and main:
            weights = unwrap(run.state.model).state_dict()
            atomic_write(folder / "model.pt", lambda f: torch.save(weights, f))
        record.write_summary(summary)
        run.techniques.distributed.close()
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


def _prepare_folder(cfg: Config, create: bool = True) -> tuple[Path, dict[str, Any] | None]:
    """The run folder, and the checkpoint to resume from (if any)."""
    ckpt = None
    if cfg.run.resume:
        folder = resume_folder(cfg.run.resume, cfg.run.out)
        path, ckpt = find_resume(cfg.run.resume, folder)  # refuses auto without a folder
        ckpt["path"] = str(path)
        _check_same_run(cfg, ckpt["config"], path)
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        dataset = cfg.data.dataset.partition(":")[0]
        folder = Path(cfg.run.out or f"runs/{stamp}-{cfg.model.name}-{dataset}")
        if create and (folder / "config.yaml").exists():
            raise ConfigError(
                f"run.out '{folder}' already holds a run record; choose another --out, or --resume auto to continue it"
            )
    if not create:
        return folder, ckpt
    try:
        (folder / "checkpoints").mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ConfigError(f"run.out '{folder}' is not writable: {err.strerror}") from None
    return folder, ckpt


def _check_same_run(cfg: Config, saved: dict[str, Any], path: Path) -> None:
    now = cfg.to_dict()
    for section, values in saved.items():
        for key, value in values.items():
            dotted = f"{section}.{key}"
            if dotted not in _RESUMABLE_CHANGES and now[section].get(key, value) != value:
                raise ConfigError(
                    f"cannot resume from '{path}': {dotted} was {value!r} there, now {now[section][key]!r}"
                )


def training_engine(state: TrainState) -> tuple[Engine, dict[str, Any]]:
    """An Ignite Engine whose iteration is one :func:`train_step` (one optimizer update),
    plus the per-epoch loss tally it keeps on the device (reset at each epoch start).

    This is everything quicktrain does per update; benchmarks/overhead.py times it."""
    trainer = Engine(lambda engine, batch: step_with_oom_retry(state, batch))
    tally: dict[str, Any] = {"sum": 0.0, "n": 0}

    @trainer.on(Events.EPOCH_STARTED)
    def _reset(engine: Engine) -> None:
        tally.update(sum=0.0, n=0)

    @trainer.on(Events.ITERATION_COMPLETED)
    def _accumulate(engine: Engine) -> None:
        out = engine.state.output
        tally["sum"] = out.loss * out.samples + tally["sum"]  # a device tensor: no sync
        tally["n"] += out.samples

    return trainer, tally


def step_with_oom_retry(state: TrainState, batch: tuple[torch.Tensor, torch.Tensor]) -> StepMetrics:
    """:func:`train_step`; on a CUDA out-of-memory error, halve the micro-batch (so double the
    accumulation: the effective batch and the update stay the same) and redo the update."""
    while True:
        try:
            return train_step(state, batch)
        except torch.OutOfMemoryError:
            state.optimizer.zero_grad(set_to_none=True)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if state.micro_batch_size <= 1:
                raise TrainingError(
                    "out of memory even at micro-batch 1; use a smaller model or --image-size, or a larger device"
                ) from None
            state.micro_batch_size = max(1, state.micro_batch_size // 2)
            state.counters.oom_halvings += 1
            log.warning(
                f"out of memory: micro-batch halved to {state.micro_batch_size} (accumulation steps doubled; "
                "the effective batch and the update are unchanged); retrying this update"
            )


def _build_engine(
    run: Run,
    record: RunRecord,
    folder: Path,
    wall_time: Callable[[], float],
    on_epoch: EpochHook | None,
    stop: StopRequest,
    position: dict[str, int],
) -> tuple[Engine, list[Callable[[], None]]]:
    """The training engine with its handlers, and what to close when the run ends.

    No handler goes on Events.EXCEPTION_RAISED: with one attached, Ignite passes the
    exception to it and does not re-raise, so a crash or Ctrl-C would look like success."""
    cfg, state = run.config, run.state
    counters, dist = state.counters, run.techniques.distributed
    trainer, epoch_loss = training_engine(state)
    watch, eval_watch = Stopwatch(run.device), Stopwatch(run.device)
    epoch_length = len(run.train_loader)
    newest = {"checkpoint": "none"}

    set_epoch(run.train_loader, position["epoch"], position["batch"])  # the loader continues from here
    done = position["epoch"] * epoch_length + position["batch"]
    if done:
        trainer.load_state_dict({"iteration": done, "max_epochs": cfg.run.epochs, "epoch_length": epoch_length})

    def checkpoint(epoch: int, batch: int, extra_time: float = 0.0) -> None:
        state.guard.check(newest["checkpoint"])  # never checkpoint weights that went NaN
        if not dist.is_main:
            return
        payload = capture(state, cfg.to_dict(), (epoch, batch))
        payload["counters"]["train_time_s"] += extra_time  # the epoch so far, mid-epoch
        path = save_checkpoint(folder / "checkpoints", payload, cfg.run.keep_checkpoints)
        newest["checkpoint"] = path.name
        run.completed.load_state_dict(payload["counters"])  # what an interrupted run's summary reports

    @trainer.on(Events.EPOCH_STARTED)
    def _start_epoch(engine: Engine) -> None:
        watch.start()

    @trainer.on(Events.ITERATION_COMPLETED)
    def _maybe_checkpoint(engine: Engine) -> None:
        it = engine.state.iteration
        batch = it - (engine.state.epoch - 1) * epoch_length
        if it % 10 == 0:
            state.guard.check(newest["checkpoint"])
        if dist.active:  # every rank must stop at the same update
            flag = dist.sum_(torch.tensor([1.0 if stop.signal else 0.0], device=run.device))
            if float(flag) > 0 and stop.signal is None:
                stop.signal = "SIGTERM"
        every = cfg.run.checkpoint_every_steps
        wanted = stop.signal is not None or (every is not None and it % every == 0)
        if wanted and batch < epoch_length:  # at the epoch's end, the epoch checkpoint follows
            checkpoint(engine.state.epoch - 1, batch, watch.elapsed())
            if stop.signal is not None:
                engine.terminate()

    @trainer.on(Events.EPOCH_COMPLETED)
    def _end_epoch(engine: Engine) -> None:
        epoch_time = watch.stop()  # training only; evaluation below is not timed
        counters.train_time_s += epoch_time
        totals = dist.sum_(
            torch.stack(
                [
                    torch.as_tensor(epoch_loss["sum"], dtype=torch.float64).to(run.device),
                    torch.tensor(float(epoch_loss["n"]), dtype=torch.float64, device=run.device),
                ]
            )
        )
        train_loss = float(totals[0]) / max(float(totals[1]), 1.0)
        state.guard.check(newest["checkpoint"])
        row = {"epoch": engine.state.epoch, "train_loss": train_loss}
        due = engine.state.epoch % cfg.run.eval_every == 0 or engine.state.epoch == cfg.run.epochs
        for split, loader in (("val", run.val_loader), ("test", run.test_loader)):
            if loader is not None and due:
                eval_watch.start()
                result = evaluate(
                    state.model,
                    loader,
                    state.inputs,
                    state.precision,
                    run.arrays.num_classes,
                    reduce=dist.sum_,
                    tta=cfg.run.tta,
                )
                row.update({f"{split}_loss": result.loss, f"{split}_accuracy": result.accuracy})
                row[f"{split}_f1_macro"] = result.f1_macro
                row[f"{split}_eval_time_s"] = eval_watch.stop()  # test-time augmentation included
        row.update(
            {
                "epoch_time_s": epoch_time,
                "images_per_s": float(totals[1]) / epoch_time,
                "lr": state.optimizer.param_groups[0]["lr"],
                "train_time_s": counters.train_time_s,
                "optimizer_updates": counters.num_updates,
            }
        )
        target, reached = cfg.run.target_accuracy, row.get("test_accuracy", 0.0)
        if target is not None and counters.time_to_target_s is None and reached >= target:
            counters.time_to_target_s = counters.train_time_s
        record.append_metrics(row)
        engine.state.metrics.update(row)
        scores = "".join(
            f"{split}_acc {row[f'{split}_accuracy']:.4f}  {split}_f1 {row[f'{split}_f1_macro']:.4f}  "
            for split in ("val", "test")
            if f"{split}_accuracy" in row
        )
        log.info(
            f"epoch {row['epoch']:>3}/{cfg.run.epochs}  train_loss {row['train_loss']:.4f}  "
            f"{scores}{row['images_per_s']:.0f} img/s  {epoch_time:.1f}s"
        )
        counters.epoch = engine.state.epoch  # complete: recorded, and checkpointed next
        counters.wall_time_s = wall_time()
        run.completed = counters.snapshot()
        checkpoint(engine.state.epoch, 0)
        if stop.signal is not None:
            engine.terminate()
        elif on_epoch is not None:
            on_epoch(row)

    cleanups = [attach_progress(trainer, cfg.run.epochs, enabled=cfg.run.progress and dist.is_main)]
    if cfg.run.tensorboard and dist.is_main:
        cleanups.append(_attach_tensorboard(trainer, state.optimizer, folder))
    return trainer, cleanups


def _attach_tensorboard(trainer: Engine, optimizer: torch.optim.Optimizer, folder: Path) -> Callable[[], None]:
    from ignite.handlers.tensorboard_logger import TensorboardLogger

    tb = TensorboardLogger(log_dir=str(folder))
    every = Events.ITERATION_COMPLETED(every=10)
    tb.attach_output_handler(trainer, event_name=every, tag="train", output_transform=lambda out: {"loss": out.loss})
    tb.attach_opt_params_handler(trainer, event_name=every, optimizer=optimizer)
    tb.attach_output_handler(
        trainer,
        event_name=Events.EPOCH_COMPLETED,
        tag="epoch",
        metric_names="all",
    )
    return tb.close


def _summary(
    run: Run, history: list[dict[str, Any]], wall_time_s: float, status: str, error: str | None
) -> dict[str, Any]:
    cfg, counters, described = run.config, run.completed, run.techniques.describe()
    last = history[-1] if history else {}
    val_scores = [r["val_accuracy"] for r in history if "val_accuracy" in r]
    test_scores = [r["test_accuracy"] for r in history if "test_accuracy" in r]
    peak, peak_kind = peak_memory_mb(run.device)
    return {
        "status": status,
        "error": error,
        "model": cfg.model.name,
        "dataset": run.arrays.name,
        **described,
        "epochs": cfg.run.epochs,
        "epochs_completed": counters.epoch,
        "optimizer_updates": counters.num_updates,
        "skipped_updates": counters.skipped_updates,
        "oom_halvings": counters.oom_halvings,
        "micro_batch_size_final": run.state.micro_batch_size,
        "grad_allreduces": run.techniques.distributed.allreduces,
        "micro_steps": counters.micro_steps,
        "test_accuracy": last.get("test_accuracy"),
        "test_f1_macro": last.get("test_f1_macro"),
        "test_loss": last.get("test_loss"),
        "test_eval_time_s": last.get("test_eval_time_s"),
        "tta": cfg.run.tta,
        "weight_averaging": f"lookahead {cfg.optim.lookahead}" if run.state.averaging.active else "off",
        "best_test_accuracy": max(test_scores, default=None),
        "val_accuracy": last.get("val_accuracy"),
        "val_f1_macro": last.get("val_f1_macro"),
        "val_loss": last.get("val_loss"),
        "best_val_accuracy": max(val_scores, default=None),
        "train_time_s": counters.train_time_s,
        "wall_time_s": wall_time_s,
        # every process trains an equal share of each global batch
        "images_per_s": counters.samples * run.techniques.distributed.world / counters.train_time_s
        if counters.train_time_s
        else None,
        "target_accuracy": cfg.run.target_accuracy,
        "time_to_target_s": counters.time_to_target_s,
        "peak_memory_mb": round(peak, 1),
        "peak_memory_kind": peak_kind,
        "device": str(run.device),
        "seed": cfg.run.seed,
        "data_order": order_fingerprint(
            len(run.arrays.train), cfg.run.seed, cfg.run.epochs, cfg.data.augment, augment_spec(cfg.data)
        ),
        "train_samples": len(run.arrays.train),
        "val_samples": len(run.arrays.val) if run.arrays.val is not None else 0,
        "test_samples": len(run.arrays.test) if run.arrays.test is not None else 0,
        "image_size": run.image_size,
        "num_classes": run.arrays.num_classes,
        "num_params": run.num_params,
        "optimizer": cfg.optim.optimizer,
        "lr": cfg.optim.lr,
        "finished_at": datetime.now().isoformat(timespec="seconds"),
    }


__all__ = ["RunResult", "train"]
