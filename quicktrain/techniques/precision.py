"""Automatic mixed precision, resolved once into an autocast context and a GradScaler.

- ``bf16``: same exponent range as fp32, so gradients cannot underflow and no scaler is
  needed. It is the CPU path (AVX-512 BF16 / AMX) and the usual choice on recent GPUs.
- ``fp16``: CUDA only; needs loss scaling, so a GradScaler is enabled.
- ``auto``: bf16 where the hardware computes it natively, else fp16 on CUDA, else off.
- ``off``: autocast is a null context and the scaler is built with ``enabled=False``,
  which makes ``scale``/``unscale_``/``step``/``update`` plain pass-throughs.

:class:`Precision` owns the backward pass and the optimizer step (as Lightning Fabric's
``Precision.backward`` / ``optimizer_step``), the GradScaler inside it, so the training step never
drives a scaler: ``backward`` scales, ``unscale`` comes before clipping, ``optimizer_step`` steps,
updates the scale and counts, on the device, the updates the scaler skipped.
"""

from __future__ import annotations

import collections
import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.amp.grad_scaler import _refresh_per_optimizer_state

from quicktrain.cpuinfo import cpu_flags
from quicktrain.errors import ConfigError
from quicktrain.techniques.base import Technique

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Precision(Technique):
    requested: str  # what the config asked for
    dtype: torch.dtype | None  # None: full fp32
    device_type: str  # "cpu" or "cuda"
    scaler: torch.amp.GradScaler | None = field(default=None, compare=False, repr=False)  # None: built here
    skips: ScalerSkips = field(default_factory=lambda: ScalerSkips(), compare=False, repr=False)
    name = "amp"

    def __post_init__(self) -> None:
        if self.scaler is None:
            object.__setattr__(self, "scaler", self.make_scaler())

    @property
    def active(self) -> bool:
        return self.dtype is not None

    @property
    def mode(self) -> str:
        """off, bf16 or fp16: what autocast runs in."""
        return {None: "off", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype]

    @property
    def needs_scaler(self) -> bool:
        return self.dtype == torch.float16

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def make_scaler(self) -> torch.amp.GradScaler:
        return torch.amp.GradScaler(self.device_type, enabled=self.needs_scaler)

    # ---- the backward pass and the optimizer step ------------------------------------------------
    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """Once per update, before clipping sees the gradients' true norm."""
        self.scaler.unscale_(optimizer)

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Step (skipped by an fp16 scaler that found inf/NaN gradients, which then lowers its scale)."""
        before = self.skips.scale(self.scaler)
        self.scaler.step(optimizer)
        self.scaler.update()
        self.skips.count(self.scaler, before)  # on the device; read at check points

    def forget_attempt(self) -> None:
        """An attempt at an update failed (out of memory): its unscale/step never happened."""
        self.scaler._per_optimizer_states = collections.defaultdict(_refresh_per_optimizer_state)

    def state_dict(self) -> dict[str, Any]:
        return {"scaler": self.scaler.state_dict()} if self.scaler.is_enabled() else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])

    def banner(self) -> str:
        return f"{self.mode} (asked: {self.requested}), grad scaler {'on' if self.needs_scaler else 'off'}"

    def record(self) -> dict[str, object]:
        return {"amp": self.mode, "amp_requested": self.requested, "grad_scaler": self.needs_scaler}


class ScalerSkips:
    """Updates the fp16 GradScaler skipped (inf/NaN gradients), counted on the device: the
    scale tensor drops exactly when the scaler skips. :meth:`settle` returns the count at the
    check points (every few updates, checkpoints, epoch ends), so no update waits for the
    device. Without a scaler it counts nothing."""

    def __init__(self) -> None:
        self.pending: torch.Tensor | None = None

    def scale(self, scaler: torch.amp.GradScaler) -> torch.Tensor | None:
        """The scale before the step, as a device tensor (``get_scale()`` would sync)."""
        return scaler._scale.clone() if scaler.is_enabled() and scaler._scale is not None else None

    def count(self, scaler: torch.amp.GradScaler, before: torch.Tensor | None) -> None:
        """After ``scaler.update()``: a lower scale means this update was skipped."""
        if before is not None:
            dropped = (scaler._scale < before).long()
            self.pending = dropped if self.pending is None else self.pending + dropped

    def settle(self) -> int:
        """The skips since the last call (the one read of the device count, at a check point)."""
        if self.pending is None:
            return 0
        count, self.pending = int(self.pending), None
        return count


def cuda_supports_bf16() -> bool:
    """True when the GPU computes bf16 natively (Ampere and newer); emulated bf16 (T4, V100) is slow."""
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch before 2.4 had no such keyword and counted only native support
        return torch.cuda.is_bf16_supported()


def cpu_supports_bf16() -> bool:
    """True when the CPU has native bf16 arithmetic (AVX-512 BF16 or AMX)."""
    try:
        if torch.ops.mkldnn._is_mkldnn_bf16_supported():
            flags = cpu_flags()
            return not flags or bool(flags & {"avx512_bf16", "amx_bf16"})
    except (AttributeError, RuntimeError):
        pass
    return False


def resolve_precision(mode: str, device: torch.device) -> Precision:
    kind, requested = device.type, mode
    if mode == "fp16" and kind != "cuda":
        raise ConfigError(
            "techniques.amp=fp16 needs a CUDA device (fp16 autocast brings no speed on CPU); "
            "on CPU use bf16, auto or off"
        )
    if mode == "auto":
        if kind == "cuda":
            mode = "bf16" if cuda_supports_bf16() else "fp16"
        else:
            mode = "bf16" if cpu_supports_bf16() else "off"
    return Precision(requested=requested, dtype=_DTYPES.get(mode), device_type=kind)


def resolve(cfg, device: torch.device, distributed=None) -> Precision:
    return resolve_precision(cfg.techniques.amp, device)


def tune_values(device_type: str, with_compile: bool) -> list[str]:
    """The precisions autotune times on this device: off, and what the hardware computes natively."""
    if device_type == "cuda":
        return ["off", *(["bf16"] if cuda_supports_bf16() else []), "fp16"]
    return ["off", "bf16"] if cpu_supports_bf16() else ["off"]
