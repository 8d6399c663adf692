"""What the run ran on: software versions and hardware, written as the record's env.json."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from quicktrain.cpuinfo import cpu_identity, first_processor


def environment(device: torch.device) -> dict[str, Any]:
    """Software and hardware facts that change speed or numbers."""
    import ignite
    import timm
    import torchvision

    from quicktrain import __version__

    cpu = first_processor()
    env: dict[str, Any] = {
        "quicktrain": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "timm": timm.__version__,
        "pytorch_ignite": ignite.__version__,
        "platform": platform.platform(),
        "cpu": cpu.get("model name") or platform.processor() or "unknown",
        **cpu_identity(cpu),  # which generation, where a VM names only the vendor ("AMD EPYC")
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "thp_mem_alloc_enable": os.environ.get("THP_MEM_ALLOC_ENABLE"),  # the user's, if any
        "device": str(device),
        "cuda": torch.version.cuda,
        "argv": sys.argv,
        "commit": source_commit(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1), cudnn=torch.backends.cudnn.version()
        )
    return env


def source_commit() -> str | None:
    """The git commit quicktrain runs from (``abc1234``, ``+dirty`` with uncommitted changes), or None
    for an installed wheel or a machine without git: the figures a run gives belong to that code."""
    package = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(package), "status", "--porcelain", "--untracked-files=no", "--", "."],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
