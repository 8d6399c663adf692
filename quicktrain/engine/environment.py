"""What the run ran on: software versions and hardware, written as the record's env.json."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch


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
        "thp_mem_alloc_enable": os.environ.get("THP_MEM_ALLOC_ENABLE"),  # the user's, if any
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
