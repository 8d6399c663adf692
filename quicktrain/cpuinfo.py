"""What /proc/cpuinfo says of this machine's CPU: read in one place for the run record
(``engine.environment``) and for native-bf16 detection (``techniques.precision``). No torch."""

from __future__ import annotations

from pathlib import Path

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


def cpu_flags(fields: dict[str, str] | None = None) -> set[str]:
    """The instruction-set flags of a processor's :func:`first_processor` fields (default: this
    machine's); empty where cpuinfo lists none (ARM names them ``Features``)."""
    return set((first_processor() if fields is None else fields).get("flags", "").split())


def cpu_identity(fields: dict[str, str]) -> dict[str, str]:
    """``cpu_model`` ("x86 family 26 model 2 stepping 1": Zen 5 where the name says only "AMD
    EPYC") and ``cpu_features`` (those of :data:`CPU_FEATURES` the CPU has), from a processor's
    :func:`first_processor` fields; empty where they name no x86 family."""
    if "cpu family" not in fields:
        return {}
    flags = cpu_flags(fields)
    model = " ".join(f"{key.split()[-1]} {fields[key]}" for key in ("cpu family", "model", "stepping") if key in fields)
    return {"cpu_model": f"x86 {model}", "cpu_features": " ".join(f for f in CPU_FEATURES if f in flags)}
