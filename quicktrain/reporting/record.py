"""The run record: a folder that describes a run completely, readable without quicktrain.

    config.yaml     the resolved config
    env.json        versions, device, CPU/GPU, command line
    metrics.jsonl   one row per epoch, appended and flushed as each epoch ends
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

    def write_config(self, config_yaml: str) -> None:
        if not self.enabled:
            return
        atomic_write_text(self.folder / "config.yaml", config_yaml)

    def write_env(self, env: dict[str, Any]) -> None:
        if not self.enabled:
            return
        atomic_write_text(self.folder / "env.json", json.dumps(env, indent=2) + "\n")

    def append_metrics(self, row: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with self.metrics_file.open("a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.enabled or not self.metrics_file.is_file():
            return []
        return [json.loads(line) for line in self.metrics_file.read_text().splitlines() if line.strip()]

    def truncate_metrics(self, epochs: int) -> None:
        """Keep rows of the first ``epochs`` epochs (a resumed run rewrites what follows)."""
        if not self.enabled:
            return
        rows = [r for r in self.read_metrics() if r["epoch"] <= epochs]
        atomic_write_text(self.metrics_file, "".join(json.dumps(r) + "\n" for r in rows))

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
