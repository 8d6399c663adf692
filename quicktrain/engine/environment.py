"""What the run ran on: software versions and hardware, written as the record's env.json."""

from __future__ import annotations

import os
import platform
import subprocess
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


# instruction sets that decide which CPU kernels run (bf16 autocast, AMX matrix tiles)
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_bf16", "amx_fp16", "amx_tile")


def first_processor(cpuinfo: str | None = None) -> dict[str, str]:
    """The fields of the first processor in ``cpuinfo`` (default: this machine's /proc/cpuinfo;
    empty where there is none), e.g. ``{"model name": "AMD EPYC", "cpu family": "26", ...}``."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text() if path.is_file() else ""
    fields: dict[str, str] = {}
    for line in cpuinfo.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def cpu_identity(fields: dict[str, str]) -> dict[str, str]:
    """``cpu_model`` ("x86 family 26 model 2 stepping 1": Zen 5 where the name says only "AMD
    EPYC") and ``cpu_features`` (those of :data:`CPU_FEATURES` the CPU has), from a processor's
    :func:`first_processor` fields; empty where they name no x86 family."""
    if "cpu family" not in fields:
        return {}
    flags = set(fields.get("flags", "").split())
    model = " ".join(f"{key.split()[-1]} {fields[key]}" for key in ("cpu family", "model", "stepping") if key in fields)
    return {"cpu_model": f"x86 {model}", "cpu_features": " ".join(f for f in CPU_FEATURES if f in flags)}
