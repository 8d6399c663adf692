"""The run's summary.json, built from its counters, config and evaluations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import torch

from quicktrain.config import model_keywords
from quicktrain.data.loader import order_fingerprint
from quicktrain.engine.setup import Run
from quicktrain.metrics import peak_memory_mb, per_class
from quicktrain.models.external import code_record


def build_summary(
    run: Run,
    evals: list[dict[str, Any]],
    wall_time_s: float,
    status: str,
    error: str | None,
    stopped_by: str,
    confusion: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """summary.json: what ran, how it ended, its final held-out scores (from the last
    evaluation, which may be mid-epoch) and its time to the target."""
    cfg, counters, described = run.config, run.completed, run.techniques.record()
    last = evals[-1] if evals else {}
    val_scores = [r["val_accuracy"] for r in evals if "val_accuracy" in r]
    test_scores = [r["test_accuracy"] for r in evals if "test_accuracy" in r]
    peak, peak_kind = peak_memory_mb(run.device)
    return {
        "status": status,
        "error": error,
        "stopped_by": stopped_by if status == "completed" else None,
        "model": cfg.model.name,
        "model_kwargs": model_keywords(cfg.model),  # --drop-path, --model-kwargs
        "model_code": code_record(cfg.model.name),  # a factory file: where it was and its sha256
        "origin": run.origin.to_dict() if run.origin else None,  # --pretrained: what was loaded, what is new
        "freeze_epochs": cfg.optim.freeze_epochs,
        "layer_decay": cfg.optim.layer_decay,
        "dataset": run.arrays.name,
        **described,
        # what was built, not what was asked: Muon has no fused kernel even on CUDA
        "optimizer_impl": _optimizer_impl(run.state.optimizer),
        "epochs": cfg.run.epochs,
        "epochs_completed": counters.epoch,
        "optimizer_updates": counters.num_updates,
        "skipped_updates": counters.skipped_updates,
        "oom_halvings": counters.oom_halvings,
        "micro_batch_size_final": run.state.techniques.accumulation.micro_batch_size,  # after any OOM halving
        "grad_allreduces": run.techniques.distributed.allreduces,
        "ddp_comm_hook": run.techniques.distributed.comm_hook,
        "micro_steps": counters.micro_steps,
        "test_accuracy": last.get("test_accuracy"),
        "test_f1_macro": last.get("test_f1_macro"),
        "test_loss": last.get("test_loss"),
        "test_eval_time_s": last.get("test_eval_time_s"),
        "test_top5_accuracy": last.get("test_top5_accuracy"),
        "test_per_class": per_class(confusion["test"], run.arrays.classes)
        if confusion and confusion.get("test") is not None
        else None,
        "raw_test_accuracy": last.get("raw_test_accuracy"),  # with --model-ema: the trained weights' scores
        "raw_test_f1_macro": last.get("raw_test_f1_macro"),
        "raw_val_accuracy": last.get("raw_val_accuracy"),
        "chance_accuracy": 1.0 / run.arrays.num_classes,
        "tta": cfg.run.tta,
        "tta_fraction": cfg.run.tta_fraction,
        "muon_ns_dtype": getattr(run.state.optimizer, "ns_precision", None),
        "best_test_accuracy": max(test_scores, default=None),
        "val_accuracy": last.get("val_accuracy"),
        "val_f1_macro": last.get("val_f1_macro"),
        "val_loss": last.get("val_loss"),
        "best_val_accuracy": max(val_scores, default=None),
        "best_checkpoint": None
        if counters.best_val_update is None
        else {
            "file": "best.pt",
            "val_accuracy": counters.best_val_accuracy,
            "update": counters.best_val_update,
            "epoch": counters.best_val_epoch,
            "weights": "raw" if counters.best_val_weights == "raw" else "scored",
        },
        "early_stop": cfg.run.early_stop,
        "train_time_s": counters.train_time_s,
        "data_wait_s": counters.data_wait_s,
        "data_wait_fraction": counters.data_wait_s / counters.train_time_s if counters.train_time_s else None,
        "wall_time_s": wall_time_s,
        # every process trains an equal share of each global batch
        "images_per_s": counters.samples * run.techniques.distributed.world / counters.train_time_s
        if counters.train_time_s
        else None,
        "target_accuracy": cfg.run.target_accuracy,
        "reached_target": None if cfg.run.target_accuracy is None else counters.time_to_target_s is not None,
        "time_to_target_s": counters.time_to_target_s,
        "updates_to_target": counters.updates_to_target,
        "epochs_to_target": counters.epochs_to_target,
        "accuracy_at_target": counters.accuracy_at_target,
        "stop_at_target": cfg.run.stop_at_target,
        "max_time_s": cfg.run.max_time,
        "eval_every_steps": cfg.run.eval_every_steps,
        "evaluations": len(evals),
        "final_eval_update": last.get("updates"),
        "final_eval_epoch": last.get("epoch"),
        "peak_memory_mb": round(peak, 1),
        "peak_memory_kind": peak_kind,
        "device": str(run.device),
        "seed": cfg.run.seed,
        "data_order": order_fingerprint(
            len(run.arrays.train), cfg.run.seed, cfg.run.epochs, cfg.data.augment, run.augment
        ),
        "train_samples": len(run.arrays.train),
        "val_samples": len(run.arrays.val) if run.arrays.val is not None else 0,
        "test_samples": len(run.arrays.test) if run.arrays.test is not None else 0,
        "image_size": run.image_size,
        "data_mode": "stream" if run.arrays.train.streamed else ("store" if run.arrays.train.lazy else "memory"),
        "input": _input(run),
        "normalization": _normalization(run),
        "num_classes": run.arrays.num_classes,
        "classes": list(run.arrays.classes),
        "num_params": run.num_params,
        "optimizer": cfg.optim.optimizer,
        "lr": cfg.optim.lr,
        "finished_at": datetime.now().isoformat(timespec="seconds"),
    }


INPUT_BOUND = 0.3  # of the training time spent waiting for batches: the run was input-bound


def input_bound_advice(summary: dict[str, Any], workers: int) -> str | None:
    """One line for the end of a run that waited for data more than :data:`INPUT_BOUND` of its
    training time: how much, and what to try; None when the input kept up."""
    fraction = summary.get("data_wait_fraction")
    if fraction is None or fraction <= INPUT_BOUND:
        return None
    tries = [f"more loader processes (--workers, now {workers})"]
    if summary.get("data_mode") == "stream":
        tries.append("the decoded store instead of streaming (--data-mode memory)")
    store = (summary.get("input") or {}).get("store_format")
    if store == "jpeg":
        tries.append("a raw store if the disk has room (--store-format raw)")
    elif store == "raw":
        tries.append("a jpeg store if the disk reads slower than it decodes (--store-format jpeg)")
    return (
        f"input-bound: training waited for the next batch {fraction:.0%} of its time "
        f"({summary['data_wait_s']:.1f} of {summary['train_time_s']:.1f}s); try " + ", ".join(tries)
    )


def _input(run: Run) -> dict[str, Any]:
    """How images became the model's inputs: the run's one input record (:class:`InputSpec`)."""
    return run.input.to_record()


def _normalization(run: Run) -> dict[str, Any] | None:
    norm = run.normalization
    return None if norm is None else {"mean": list(norm.mean), "std": list(norm.std), "source": norm.source}


def _optimizer_impl(optimizer: torch.optim.Optimizer) -> str:
    """ "fused" (one kernel), "scaler-aware" (skips an fp16 overflow on the device, as Muon does)
    or "default" (GradScaler reads the overflow flag on the host before the step)."""
    if optimizer.defaults.get("fused"):
        return "fused"
    return "scaler-aware" if getattr(optimizer, "_step_supports_amp_scaling", False) else "default"
