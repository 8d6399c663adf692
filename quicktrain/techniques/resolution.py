"""Progressive resizing: the first epochs train on images downscaled on the device, the rest
(and every evaluation) at full size. Fewer pixels early cost fewer FLOPs while the network
learns coarse features anyway; the data order, augmentation and labels are untouched, only the
size of the float batch after normalisation changes.

``ProgressiveResize(None, 0)`` (the default) passes batches through unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from quicktrain.techniques.base import Technique


class ProgressiveResize(Technique):
    name = "low_res"

    def __init__(self, low_res: int | None, epochs: int) -> None:
        self.low_res = low_res
        self.epochs = epochs if low_res else 0
        self.size: int | None = None  # the size this epoch trains at; None: as loaded

    @property
    def active(self) -> bool:
        return self.epochs > 0

    def set_epoch(self, epoch: int) -> None:
        """``epoch``: 0-based index of the epoch about to run."""
        self.size = self.low_res if epoch < self.epochs else None

    def start_epoch(self, epoch: int) -> None:
        self.set_epoch(epoch)

    def micro_input(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)

    def banner(self) -> str | None:
        return (
            f"the first {self.epochs} epochs at {self.low_res} px (downscaled on the device)" if self.active else None
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.size is None or x.shape[-1] == self.size:
            return x
        # antialiased: a plain bilinear downscale aliases (it skips pixels instead of averaging them)
        return F.interpolate(x, size=(self.size, self.size), mode="bilinear", antialias=True, align_corners=False)


def resolve(cfg: Any, device: Any = None, distributed: Any = None) -> ProgressiveResize:
    return ProgressiveResize(cfg.data.low_res, cfg.data.low_res_epochs)
