"""``quicktrain ablate``: run every combination of the techniques under test and record it.

Each run is a fresh process that calls ``train(cfg)`` on the arm's config file
(:mod:`quicktrain.experiments.worker`; no warmed caches or allocator state shared between
arms) writing an ordinary run record under ``OUT/runs/<name>/``, plus
``arm.json`` saying which arm it is. ``OUT/ablation.csv`` is rewritten after every run.
Running the same command again skips completed runs, resumes interrupted ones from their
last checkpoint and retries failed ones.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quicktrain.atomic import atomic_write_text
from quicktrain.config import Config
from quicktrain.engine.checkpoint import list_checkpoints
from quicktrain.errors import ConfigError
from quicktrain.experiments.grid import Job, Switch, arm_name, plan

log = logging.getLogger("quicktrain")

CSV_COLUMNS = (
    "run", "model", "dataset", "arm", "repeat", "seed", "status", "error",
    "amp", "accum_steps", "micro_batch_size", "pin_memory", "pin_memory_active", "channels_last", "compile",
    "epochs_completed", "optimizer_updates", "stopped_by", "train_time_s", "wall_time_s", "images_per_s",
    "test_accuracy", "test_f1_macro", "chance_accuracy", "target_accuracy", "reached_target", "time_to_target_s",
    "updates_to_target", "epochs_to_target", "accuracy_at_target", "max_time_s", "data_order",
)  # fmt: skip


@dataclass(frozen=True)
class AblationSpec:
    techniques: tuple[str, ...]
    models: list[str]
    datasets: list[str]
    repeats: int
    accum_steps: int
    base: Config  # everything not under test
    out: Path
    switches: dict[str, Switch] = field(default_factory=dict)  # recipe ingredients beside the techniques
    design: str = "factorial"  # every subset, or "single": the baseline and each technique alone

    def jobs(self) -> list[Job]:
        if self.repeats < 1:
            raise ConfigError(f"--repeats must be at least 1, got {self.repeats}")
        if self.accum_steps < 2:
            raise ConfigError(f"--accum-steps must be at least 2 for 'ga' to mean anything, got {self.accum_steps}")
        base_seed = self.base.run.seed
        return plan(
            self.techniques,
            self.models,
            self.datasets,
            self.repeats,
            base_seed,
            self.accum_steps,
            self.switches,
            self.design,
        )


def run_ablation(spec: AblationSpec, argv: Sequence[str] = (), progress: bool = True) -> Path:
    """Run (or continue) the grid; return the path of ``ablation.csv``."""
    jobs = spec.jobs()
    spec.out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "command": " ".join(["quicktrain", "ablate", *argv]),
        "techniques": list(spec.techniques),
        "design": spec.design,
        "models": spec.models,
        "datasets": spec.datasets,
        "repeats": spec.repeats,
        "accum_steps": spec.accum_steps,
        "runs": [job.name for job in jobs],
        "base_config": spec.base.to_dict(),
    }
    atomic_write_text(spec.out / "ablation.json", json.dumps(manifest, indent=2) + "\n")
    todo = [job for job in jobs if _status(spec.out / "runs" / job.name) != "completed"]
    log.info(f"ablation: {len(jobs)} runs ({len(jobs) - len(todo)} already completed) -> {spec.out}")
    bar = _bar(len(jobs), len(jobs) - len(todo), progress)
    try:
        for job in todo:
            bar.set_postfix_str(job.name)
            started = time.perf_counter()
            summary = _run_job(spec, job)
            bar.update()
            took = time.perf_counter() - started
            if summary["status"] == "completed":
                ttt = summary.get("time_to_target_s")
                reached = f", target at {ttt:.1f}s" if ttt is not None else ""
                missed = ", target not reached" if summary.get("reached_target") is False else ""
                bar.write(
                    f"  {job.name}: train {summary['train_time_s']:.1f}s, test acc {summary['test_accuracy']:.4f}"
                    f"{reached}{missed}, stopped by {summary.get('stopped_by')}  ({took:.0f}s with start-up)"
                )
            else:
                bar.write(f"  {job.name}: {summary['status']}: {summary.get('error')}")
            write_csv(spec.out, jobs)
    except KeyboardInterrupt:
        log.warning("ablation interrupted; run the same command again to continue")
        raise
    finally:
        bar.close()
        write_csv(spec.out, jobs)
    return spec.out / "ablation.csv"


def _bar(total: int, done: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc="ablation", unit="run", disable=not enabled, file=sys.stdout)


def _status(folder: Path) -> str | None:
    path = folder / "summary.json"
    return json.loads(path.read_text()).get("status") if path.is_file() else None


def _run_job(spec: AblationSpec, job: Job) -> dict[str, Any]:
    folder = spec.out / "runs" / job.name
    arm_info = {"arm": arm_name(job.arm), "techniques_under_test": list(spec.techniques), "repeat": job.repeat}
    used = [spec.switches[t] for t in spec.techniques if t in spec.switches]
    if used:  # what each ingredient meant, so the record says it without the command line
        arm_info["switches"] = {s.name: {"on": s.on, "off": s.off} for s in used}
    try:
        cfg = Config.from_overrides({**job.overrides, "run.out": str(folder), "run.progress": False}, spec.base)
    except ConfigError as err:
        return _record_failure(folder, job, arm_info, str(err))
    resumable = (folder / "config.yaml").is_file() and list_checkpoints(folder / "checkpoints")
    if resumable:  # continue from its own config and newest checkpoint
        cfg = Config.load(folder / "config.yaml", {"run.resume": "auto", "run.out": str(folder), "run.progress": False})
    elif folder.exists():
        shutil.rmtree(folder)  # a failed or never-checkpointed attempt: start clean
    config_file = spec.out / "configs" / f"{job.name}.yaml"
    atomic_write_text(config_file, cfg.to_yaml())
    log_file = spec.out / "logs" / f"{job.name}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("a") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "quicktrain.experiments.worker", str(config_file)],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if folder.is_dir():
        atomic_write_text(folder / "arm.json", json.dumps(arm_info, indent=2) + "\n")
    summary_file = folder / "summary.json"
    if summary_file.is_file():
        summary = json.loads(summary_file.read_text())
        if proc.returncode == 130:
            raise KeyboardInterrupt
        return summary
    lines = [line for line in log_file.read_text().splitlines() if line.strip()]
    reason = lines[-1] if lines else f"exit status {proc.returncode}"
    return _record_failure(folder, job, arm_info, reason)


def _record_failure(folder: Path, job: Job, arm_info: dict[str, Any], error: str) -> dict[str, Any]:
    """A run that never wrote its own record (bad config, crash at start-up) still gets one."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = {"status": "failed", "error": error, "model": job.model, "dataset": job.dataset, "seed": job.seed}
    atomic_write_text(folder / "summary.json", json.dumps(summary, indent=2) + "\n")
    atomic_write_text(folder / "arm.json", json.dumps(arm_info, indent=2) + "\n")
    return summary


def write_csv(out: Path, jobs: list[Job]) -> Path:
    """One row per run that has a record, in grid order."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for job in jobs:
        folder = out / "runs" / job.name
        if not (folder / "summary.json").is_file():
            continue
        summary = json.loads((folder / "summary.json").read_text())
        writer.writerow(
            {
                **summary,
                "run": job.name,
                "model": job.model,
                "dataset": job.dataset,
                "arm": arm_name(job.arm),
                "repeat": job.repeat,
                "seed": job.seed,
            }
        )
    path = out / "ablation.csv"
    atomic_write_text(path, buffer.getvalue())
    return path
