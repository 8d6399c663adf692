"""Pinned (page-locked) host memory for host-to-device copies.

Pinning only helps when there is a device to copy to: the DataLoader then pins each batch
in a background thread and the copy is issued ``non_blocking``, so it does not stall the
host. The two go together: ``non_blocking`` from pageable memory is silently synchronous,
and pinning without ``non_blocking`` still waits for the copy. On CPU there is nothing to
do, which is reported once and recorded, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quicktrain.techniques.base import Technique


@dataclass(frozen=True)
class Pinning(Technique):
    requested: bool
    active: bool  # pin in the loader and copy non_blocking
    note: str = ""  # why a request was not acted on
    cuda: bool = False  # there is a host-to-device copy to overlap
    name = "pin"

    def banner(self) -> str:
        if self.note:
            return f"off (asked for, but {self.note}; recorded as pin_memory_active=false)"
        if self.cuda and not self.active:  # off by default, as in torch's DataLoader and timm
            return "off: each batch's copy to the GPU waits for it (--pin-memory overlaps them)"
        return "on" if self.active else "off"

    def record(self) -> dict[str, object]:
        return {"pin_memory": self.requested, "pin_memory_active": self.active}


def resolve_pinning(requested: bool, device: torch.device) -> Pinning:
    if requested and device.type != "cuda":
        return Pinning(True, False, f"it has no effect on device '{device}': there is no host-to-device copy")
    return Pinning(requested, requested, cuda=device.type == "cuda")


def resolve(cfg, device: torch.device, distributed=None) -> Pinning:
    return resolve_pinning(cfg.techniques.pin_memory, device)
