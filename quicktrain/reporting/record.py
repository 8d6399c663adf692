"""The run record: a folder that describes a run completely, readable without quicktrain.

    config.yaml     the resolved config
    env.json        versions, device, CPU/GPU, command line
    metrics.jsonl   one row per epoch, appended and flushed as each epoch ends
    evals.jsonl     one row per evaluation (epoch ends and --eval-every-steps), with its update
    summary.json    written last, atomically: its presence means the record is complete
    model.pt        final weights as a plain state dict (torch.load(..., weights_only=True))
    checkpoints/    resumable state, newest few epochs
    events.*        TensorBoard event files

Reports read only these files.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch

from quicktrain.atomic import atomic_write_text

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


def environment(device: torch.device) -> dict[str, Any]:
    """Software and hardware facts that change speed or numbers."""
    import ignite
    import timm
    import torchvision

    from quicktrain import __version__

    env: dict[str, Any] = {
        "quicktrain": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "timm": timm.__version__,
        "pytorch_ignite": ignite.__version__,
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "thp_mem_alloc_enable": os.environ.get("THP_MEM_ALLOC_ENABLE"),  # set by quicktrain on Linux
        "device": str(device),
        "cuda": torch.version.cuda,
        "argv": sys.argv,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1), cudnn=torch.backends.cudnn.version()
        )
    return env


def _cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or "unknown"
