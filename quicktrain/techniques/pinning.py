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


@dataclass(frozen=True)
class Pinning:
    requested: bool
    active: bool  # pin in the loader and copy non_blocking
    note: str | None = None  # why a request was not acted on


def resolve_pinning(requested: bool, device: torch.device) -> Pinning:
    if requested and device.type != "cuda":
        return Pinning(True, False, f"it has no effect on device '{device}': there is no host-to-device copy")
    return Pinning(requested, requested)
