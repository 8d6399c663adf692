"""The device-resident training split (``data.loader=device``) as a technique.

The loader itself lives in :mod:`quicktrain.data.device_loader`; this object is what the
registry resolves, so ablations and autotune can switch it and the record says it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from quicktrain.errors import ConfigError
from quicktrain.techniques.base import LoaderRequest, Technique


@dataclass(frozen=True)
class DeviceData(Technique):
    active: bool
    name = "loader"

    def train_loader(self, request: LoaderRequest) -> Any | None:
        if not self.active:
            return None
        if request.streamed:
            raise ConfigError(
                "data.loader=device holds the training split on the device, but it is streamed from files "
                "(data.data_mode); use --data-mode memory, or --loader torch with --workers"
            )
        if request.photos:
            raise ConfigError(
                "data.loader=device holds equal-sized images on the device; photos keep their aspect ratio and "
                "are cropped per epoch from the photo store: use --loader torch with --workers"
            )
        from quicktrain.data.device_loader import DeviceLoader

        r = request
        return DeviceLoader(r.split, r.batch_size, r.seed, r.device, r.augment, r.rank, r.world, r.spec)

    def record(self) -> dict[str, object]:
        return {"loader": "device" if self.active else "torch"}


def resolve(cfg, device: torch.device, distributed=None) -> DeviceData:
    return DeviceData(cfg.data.loader == "device")
