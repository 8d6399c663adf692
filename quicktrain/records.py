"""The run-record format, torch-free: what a run folder holds, the names of its files and
fields, the slugs that reports group by (technique names come from
:mod:`quicktrain.techniques.registry`), and the writer the engine uses.
The engine, experiments and reporting all read it from here; nothing here imports torch.

A run record is a folder that describes a run completely, readable without quicktrain:

    config.yaml     the resolved config
    env.json        versions, device, CPU/GPU, command line
    metrics.jsonl   one row per epoch, appended and flushed as each epoch ends
    summary.csv     the same rows as a table (timm's train.py convention), rewritten each epoch
    evals.jsonl     one row per evaluation (epoch ends and --eval-every-steps), with its update
    summary.json    written last, atomically: its presence means the record is complete
    model.pt        final weights as a plain state dict (torch.load(..., weights_only=True))
    best.pt         with a validation split: the weights of the best validation accuracy
    checkpoints/    resumable state, newest few epochs
    events.*        TensorBoard event files

Reports read only these files.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path
from typing import Any

from quicktrain.atomic import atomic_write_text
from quicktrain.techniques.registry import BASELINE as BASELINE  # the arm names reports group by
from quicktrain.techniques.registry import technique_arm as technique_arm


def dataset_slug(dataset: str) -> str:
    """A folder-name-safe short name: ``imagefolder:../x/cifar10-jpeg`` -> ``cifar10-jpeg``.

    >>> dataset_slug("imagefolder:../data/cifar10-jpeg/")
    'cifar10-jpeg'
    """
    kind, _, path = dataset.partition(":")
    name = path.rstrip("/").rsplit("/", 1)[-1] if path else kind
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name) or kind


def model_slug(model: str) -> str:
    """A folder-name-safe short name for a model reference.

    >>> model_slug("timm:convnext_atto"), model_slug("../nets/tiny.py:make"), model_slug("pkg.nets:build")
    ('timm-convnext_atto', 'tiny-make', 'nets-build')
    """
    target, sep, function = model.rpartition(":")
    if not sep:
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", model)
    if target != "timm":
        target = target.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py").rsplit(".", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{target}-{function}")


METRIC_FIELDS = (
    "epoch",
    "train_loss",
    "test_loss",
    "test_accuracy",
    "test_f1_macro",
    "epoch_time_s",
    "images_per_s",
    "lr",
)


class RunRecord:
    def __init__(self, folder: Path, enabled: bool = True) -> None:
        self.folder = folder
        self.enabled = enabled  # False on data-parallel ranks other than 0: they write nothing

    @property
    def metrics_file(self) -> Path:
        return self.folder / "metrics.jsonl"

    @property
    def evals_file(self) -> Path:
        return self.folder / "evals.jsonl"

    def write_config(self, config_yaml: str) -> None:
        if not self.enabled:
            return
        atomic_write_text(self.folder / "config.yaml", config_yaml)

    def write_env(self, env: dict[str, Any]) -> None:
        if not self.enabled:
            return
        atomic_write_text(self.folder / "env.json", json.dumps(env, indent=2) + "\n")

    def append_metrics(self, row: dict[str, Any]) -> None:
        self._append(self.metrics_file, row)
        self._write_table()

    def _write_table(self) -> None:
        """summary.csv: metrics.jsonl's rows, one per epoch, columns in order of first appearance
        (an epoch without an evaluation leaves its test columns empty)."""
        if not self.enabled:
            return
        rows = self.read_metrics()
        columns = list(dict.fromkeys(key for row in rows for key in row))
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(self.folder / "summary.csv", buffer.getvalue())

    def append_eval(self, row: dict[str, Any]) -> None:
        self._append(self.evals_file, row)

    def read_metrics(self) -> list[dict[str, Any]]:
        return self._read(self.metrics_file)

    def read_evals(self) -> list[dict[str, Any]]:
        return self._read(self.evals_file)

    def truncate(self, epochs: int, updates: int) -> None:
        """Keep the rows of the first ``epochs`` epochs and the evaluations of the first
        ``updates`` updates: a resumed run rewrites what follows."""
        if not self.enabled:
            return
        for path, keep in (
            (self.metrics_file, lambda r: r["epoch"] <= epochs),
            (self.evals_file, lambda r: r["updates"] <= updates),
        ):
            rows = [r for r in self._read(path) if keep(r)]
            atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
        self._write_table()

    def _append(self, path: Path, row: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with path.open("a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _read(self, path: Path) -> list[dict[str, Any]]:
        if not self.enabled or not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def write_summary(self, summary: dict[str, Any]) -> None:
        if not self.enabled:
            return
        atomic_write_text(self.folder / "summary.json", json.dumps(summary, indent=2) + "\n")
