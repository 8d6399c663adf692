"""The epoch loop on PyTorch Ignite: Ignite drives :func:`train_step` (through the OOM retry);
the handlers below, one named method each, time, evaluate, record, checkpoint and stop.
Nothing here changes what a step computes.

When training stops, and why (``stopped_by`` in the record):
- ``epochs``: the last epoch ended;
- ``target``: ``run.stop_at_target`` and an evaluation reached ``run.target_accuracy``;
- ``max_time``: the training time passed ``run.max_time`` (checked after every update
  without a device sync; the time recorded is synchronised). Ignite's ``TimeLimit`` handler
  counts wall time since the engine started, evaluation included, so it does not serve here;
- ``early_stop``: ``run.early_stop`` evaluations passed without a better validation accuracy;
- ``signal``: SIGTERM or a first Ctrl-C (the run is then ``interrupted``).
A stop between epoch ends writes a mid-epoch checkpoint first, so the record is complete.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from ignite.engine import Engine, Events

from quicktrain.atomic import atomic_write
from quicktrain.data.loader import set_epoch
from quicktrain.engine.checkpoint import capture, save_checkpoint
from quicktrain.engine.evaluate import evaluate
from quicktrain.engine.oom import step_with_oom_retry
from quicktrain.engine.progress import attach_progress
from quicktrain.engine.setup import Run
from quicktrain.engine.state import TrainState
from quicktrain.engine.tracking import start_trackers
from quicktrain.metrics import Stopwatch
from quicktrain.records import RunRecord
from quicktrain.techniques.base import unwrap

log = logging.getLogger("quicktrain")

EpochHook = Callable[[dict[str, Any]], None]
CHECK_EVERY = 10  # updates between the loop's reads of device state (NaN flag, skip counts, DDP stop agreement)


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


class Loop:
    """The training engine and its handlers. ``stop_signal()`` says whether SIGTERM/SIGINT
    asked to stop; ``stopped_by`` says why training ended.

    No handler goes on Events.EXCEPTION_RAISED: with one attached, Ignite passes the
    exception to it and does not re-raise, so a crash or Ctrl-C would look like success."""

    def __init__(
        self,
        run: Run,
        record: RunRecord,
        folder: Path,
        wall_time: Callable[[], float],
        on_epoch: EpochHook | None,
        stop_signal: Callable[[], str | None],
        position: dict[str, int],
    ) -> None:
        self.run, self.record, self.folder = run, record, folder
        self.cfg, self.state = run.config, run.state
        self.counters, self.dist = run.state.counters, run.techniques.distributed
        self.wall_time, self.on_epoch, self.stop_signal = wall_time, on_epoch, stop_signal
        self.trainer, self.epoch_loss = training_engine(self.state)
        self.watch, self.eval_watch = Stopwatch(run.device), Stopwatch(run.device)
        self.epoch_length = len(run.train_loader)
        self.epoch_started_at = 0.0  # watch.total when this epoch began: the epoch's time is the rest
        self.epoch_wait = 0.0  # seconds this epoch waited for batches (host clock, as timm's data time)
        self.fetch_started = 0.0
        self.newest_checkpoint = "none"
        self.stopped_by = "epochs"
        self.signalled = False  # another rank was signalled (DDP): stop with it
        self.last_confusion: dict[str, torch.Tensor] = {}  # split -> the last evaluation's confusion matrix

        set_epoch(run.train_loader, position["epoch"], position["batch"])  # the loader continues from here
        done = position["epoch"] * self.epoch_length + position["batch"]
        if done:
            self.trainer.load_state_dict(
                {"iteration": done, "max_epochs": self.cfg.run.epochs, "epoch_length": self.epoch_length}
            )
        self.trainer.add_event_handler(Events.EPOCH_STARTED, self.start_epoch)
        self.trainer.add_event_handler(Events.GET_BATCH_STARTED, self.fetch_batch)
        self.trainer.add_event_handler(Events.GET_BATCH_COMPLETED, self.batch_fetched)
        self.trainer.add_event_handler(Events.ITERATION_COMPLETED, self.after_update)
        self.trainer.add_event_handler(Events.EPOCH_COMPLETED, self.end_epoch)
        self.cleanups = [
            attach_progress(self.trainer, self.cfg.run.epochs, enabled=self.cfg.run.progress and self.main)
        ]
        # TensorBoard, MLflow, W&B, ...: each registered tracker the config turns on; rank 0 speaks for all
        self.trackers = start_trackers(self.cfg, self.trainer, self.state.optimizer, folder) if self.main else []

    @property
    def main(self) -> bool:
        return self.dist.is_main

    # ---- clocks ------------------------------------------------------------------------
    def epoch_time(self, sync: bool = True) -> float:
        """Training time of the epoch in progress so far (evaluations excluded)."""
        return self.watch.total - self.epoch_started_at + self.watch.elapsed(sync)

    def train_time(self, sync: bool = True) -> float:
        return self.counters.train_time_s + self.epoch_time(sync)

    # ---- handlers ----------------------------------------------------------------------
    def start_epoch(self, engine: Engine) -> None:
        self.state.techniques.start_epoch(engine.state.epoch - 1)  # Ignite counts epochs from 1
        self.epoch_started_at = self.watch.total
        self.epoch_wait = 0.0
        self.watch.start()

    def fetch_batch(self, engine: Engine) -> None:
        self.fetch_started = time.perf_counter()

    def batch_fetched(self, engine: Engine) -> None:
        """The time the loop waited for this batch: the loader's, not hidden behind the step."""
        self.epoch_wait += time.perf_counter() - self.fetch_started

    def after_update(self, engine: Engine) -> None:
        """After every optimizer update: NaN check every 10 updates; agree on stopping;
        evaluate when ``run.eval_every_steps`` says so; checkpoint when asked or stopping."""
        it = engine.state.iteration
        batch = it - (engine.state.epoch - 1) * self.epoch_length
        mid_epoch = batch < self.epoch_length  # at the epoch's end, end_epoch does the rest
        check_point = it % CHECK_EVERY == 0
        if check_point:  # the device is read here, never inside an update
            self.state.guard.check(self.newest_checkpoint)
            self.state.settle()
        budget = self.cfg.run.max_time
        time_up = budget is not None and self.train_time(sync=False) >= budget
        if self.dist.active:  # every rank must stop at the same update: they agree at check points
            time_up = self.agree(time_up) if check_point else False
        if time_up:
            self.stopped_by = "max_time"
        every = self.cfg.run.eval_every_steps
        if mid_epoch and (time_up or (every is not None and it % every == 0)):
            self.watch.stop()  # evaluation is never training time
            self.evaluate_now(engine, batch)
        if self.signal_pending():
            self.stopped_by = "signal"
        every_ckpt = self.cfg.run.checkpoint_every_steps
        stopping = self.stopped_by != "epochs"
        if mid_epoch and (stopping or (every_ckpt is not None and it % every_ckpt == 0)):
            self.checkpoint(engine.state.epoch - 1, batch, self.epoch_time())
            if stopping:
                self.announce_stop()
                engine.terminate()
                return  # the clock stays stopped: the record's time is the time at the stop
        if not self.watch.running:
            self.watch.start()

    def end_epoch(self, engine: Engine) -> None:
        self.watch.stop()  # training only; evaluation below is not timed
        epoch_time = self.epoch_time()  # without the pauses for mid-epoch evaluations
        self.counters.train_time_s += epoch_time
        totals = self.dist.sum_(
            torch.stack(
                [
                    torch.as_tensor(self.epoch_loss["sum"], dtype=torch.float64).to(self.run.device),
                    torch.tensor(float(self.epoch_loss["n"]), dtype=torch.float64, device=self.run.device),
                    torch.tensor(self.epoch_wait, dtype=torch.float64, device=self.run.device),
                ]
            )
        )
        train_loss = float(totals[0]) / max(float(totals[1]), 1.0)
        data_wait = float(totals[2]) / self.dist.world  # the ranks' mean
        self.counters.data_wait_s += data_wait
        self.state.guard.check(self.newest_checkpoint)
        self.state.settle()
        budget = self.cfg.run.max_time
        if self.dist.active and self.agree(budget is not None and self.counters.train_time_s >= budget):
            self.stopped_by = "max_time"  # some rank ran out of time at this epoch's end
        epoch, cfg = engine.state.epoch, self.cfg
        every = cfg.run.eval_every_steps
        due = (
            epoch % cfg.run.eval_every == 0
            or epoch == cfg.run.epochs
            or self.stopped_by == "max_time"
            or (every is not None and self.counters.num_updates % every == 0)
        )
        row: dict[str, Any] = {"epoch": epoch, "train_loss": train_loss}
        if due:
            row.update(self.evaluate_now(engine, self.epoch_length, log_it=False))
        row.update(
            {
                "epoch_time_s": epoch_time,
                "images_per_s": float(totals[1]) / epoch_time,
                "data_wait_s": data_wait,
                "lr": self.state.optimizer.param_groups[0]["lr"],
                "train_time_s": self.counters.train_time_s,
                "optimizer_updates": self.counters.num_updates,
            }
        )
        self.record.append_metrics(row)
        engine.state.metrics.update(row)
        scores = "".join(
            f"{split}_acc {row[f'{split}_accuracy']:.4f}  {split}_f1 {row[f'{split}_f1_macro']:.4f}  "
            for split in ("val", "test")
            if f"{split}_accuracy" in row
        )
        log.info(
            f"epoch {epoch:>3}/{cfg.run.epochs}  train_loss {train_loss:.4f}  "
            f"{scores}{row['images_per_s']:.0f} img/s  {epoch_time:.1f}s"
        )
        self.counters.epoch = epoch  # complete: recorded, and checkpointed next
        self.counters.wall_time_s = self.wall_time()
        self.run.completed = self.counters.snapshot()
        self.checkpoint(epoch, 0)
        if self.signal_pending():
            self.stopped_by = "signal"
        elif epoch == cfg.run.epochs:
            self.stopped_by = "epochs"  # a target or budget met by the last update stopped nothing early
        if self.stopped_by != "epochs" and epoch < cfg.run.epochs:
            self.announce_stop()
            engine.terminate()
        elif self.on_epoch is not None:
            self.on_epoch(row)

    # ---- the parts the handlers share ----------------------------------------------------
    def signal_pending(self) -> bool:
        """A stop asked by SIGTERM/SIGINT; under DDP only once every rank knows (:meth:`agree`)."""
        return self.signalled if self.dist.active else self.stop_signal() is not None

    def agree(self, time_up: bool) -> bool:
        """DDP: one all-reduce of (signalled, out of time) so every rank stops at the same update;
        returns whether any rank is out of time."""
        local = [float(self.stop_signal() is not None), float(time_up)]
        flags = self.dist.sum_(torch.tensor(local, device=self.run.device)).tolist()
        self.signalled = self.signalled or flags[0] > 0
        return flags[1] > 0

    def evaluate_now(self, engine: Engine, batch: int, log_it: bool = True) -> dict[str, Any]:
        """Evaluate every held-out split now (the caller has paused the training clock),
        append the row to evals.jsonl, note the target; returns the split scores."""
        state, cfg, counters = self.state, self.cfg, self.counters
        scores: dict[str, Any] = {}
        scored = self.run.techniques.scored_model(state.model)  # the EMA of the weights, or the model
        models = {"": scored} if scored is state.model else {"": scored, "raw_": state.model}
        for split, loader in (("val", self.run.val_loader), ("test", self.run.test_loader)):
            if loader is None:
                continue
            for prefix, model in models.items():
                self.eval_watch.start()
                result = evaluate(
                    model,
                    loader,
                    state.inputs,
                    state.techniques.precision,
                    self.run.arrays.num_classes,
                    reduce=self.dist.sum_,
                    tta=cfg.run.tta,
                    tta_fraction=cfg.run.tta_fraction,
                )
                name = f"{prefix}{split}"
                scores.update({f"{name}_loss": result.loss, f"{name}_accuracy": result.accuracy})
                scores[f"{name}_f1_macro"] = result.f1_macro
                if result.top5 is not None:
                    scores[f"{name}_top5_accuracy"] = result.top5
                if not prefix:
                    self.last_confusion[split] = result.confusion
                scores[f"{name}_eval_time_s"] = self.eval_watch.stop()  # test-time augmentation included
        epochs_done = engine.state.epoch - 1 + batch / self.epoch_length
        train_time = counters.train_time_s + (0.0 if batch == self.epoch_length else self.epoch_time())
        row = {"updates": counters.num_updates, "epoch": round(epochs_done, 6), "train_time_s": train_time, **scores}
        self.record.append_eval(row)
        if "val_accuracy" in scores:
            self.track_best(scores["val_accuracy"], row["epoch"], scores.get("raw_val_accuracy"))
        target, reached = cfg.run.target_accuracy, scores.get("test_accuracy")
        if target is not None and counters.time_to_target_s is None and reached is not None and reached >= target:
            counters.time_to_target_s = train_time
            counters.updates_to_target = counters.num_updates
            counters.epochs_to_target = row["epoch"]
            counters.accuracy_at_target = reached
            if cfg.run.stop_at_target:
                self.stopped_by = "target"
        if log_it and scores:
            said = "  ".join(
                f"{split}_acc {scores[f'{split}_accuracy']:.4f}"
                for split in ("val", "test")
                if f"{split}_accuracy" in scores
            )
            log.info(f"update {counters.num_updates:>5} (epoch {epochs_done:.2f})  {said}  {train_time:.1f}s trained")
        return scores

    def track_best(self, val_accuracy: float, epoch: float, raw_val_accuracy: float | None = None) -> None:
        """best.pt: the weights of the best validation accuracy so far (never the test split's), the
        scored ones (the EMA) or, when they scored better, the trained ones (``raw_val_accuracy``);
        --early-stop: stop after that many evaluations without a better one."""
        c = self.counters
        raw_better = raw_val_accuracy is not None and raw_val_accuracy > val_accuracy
        best = raw_val_accuracy if raw_better else val_accuracy
        if c.best_val_accuracy is None or best > c.best_val_accuracy:
            c.best_val_accuracy, c.best_val_update, c.best_val_epoch = best, c.num_updates, epoch
            c.best_val_weights = "raw" if raw_better else "scored"
            c.evals_since_best = 0
            if self.main:
                model = self.state.model if raw_better else self.run.techniques.scored_model(self.state.model)
                weights = unwrap(model).state_dict()
                atomic_write(self.folder / "best.pt", lambda f: torch.save(weights, f))
            return
        c.evals_since_best += 1
        patience = self.cfg.run.early_stop
        if patience is not None and c.evals_since_best >= patience and self.stopped_by == "epochs":
            self.stopped_by = "early_stop"
            log.info(
                f"early stop: {c.evals_since_best} evaluations without a better validation accuracy than "
                f"{c.best_val_accuracy:.4f} (update {c.best_val_update}); best.pt holds those weights"
            )

    def checkpoint(self, epoch: int, batch: int, extra_time: float = 0.0) -> None:
        """``(epoch, batch)``: the data position; ``extra_time``: the epoch's training so far."""
        self.state.guard.check(self.newest_checkpoint)  # never checkpoint weights that went NaN
        self.state.settle()
        if not self.main:
            return
        payload = capture(self.state, self.cfg.to_dict(), (epoch, batch))
        payload["counters"]["train_time_s"] += extra_time  # the epoch so far, mid-epoch
        if batch:
            payload["counters"]["data_wait_s"] += self.epoch_wait
        path = save_checkpoint(self.folder / "checkpoints", payload, self.cfg.run.keep_checkpoints)
        self.newest_checkpoint = path.name
        self.run.completed.load_state_dict(payload["counters"])  # what a stopped run's summary reports

    def announce_stop(self) -> None:
        c, target = self.run.completed, self.cfg.run.target_accuracy
        if self.stopped_by == "target":
            log.info(
                f"reached the target {target} (test accuracy {c.accuracy_at_target:.4f}) at update "
                f"{c.updates_to_target} (epoch {c.epochs_to_target:.2f}) after {c.time_to_target_s:.1f}s of "
                "training: stopping (--stop-at-target)"
            )
        elif self.stopped_by == "max_time":
            log.info(
                f"training time {c.train_time_s:.1f}s passed --max-time {self.cfg.run.max_time:g}s: stopped after "
                f"update {c.num_updates}"
            )
