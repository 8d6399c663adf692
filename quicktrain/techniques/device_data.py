"""The device-resident training split (``data.loader=device``) as a technique.

The loader itself lives in :mod:`quicktrain.data.device_loader`; this object is what the
registry resolves, so ablations and autotune can switch it and the record says it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quicktrain.techniques.base import Technique


@dataclass(frozen=True)
class DeviceData(Technique):
    active: bool
    name = "loader"

    def record(self) -> dict[str, object]:
        return {"loader": "device" if self.active else "torch"}


def resolve(cfg, device: torch.device, distributed=None) -> DeviceData:
    return DeviceData(cfg.data.loader == "device")
