"""Progressive resizing: the first epochs train on images downscaled on the device, optionally a
second stage at a middle size after them, the rest (and every evaluation) at full size. Fewer
pixels early cost fewer FLOPs while the network learns coarse features anyway; the data order,
augmentation and labels are untouched, only the size of the float batch after normalisation
changes.

``ProgressiveResize(None, 0)`` (the default) passes batches through unchanged;
``ProgressiveResize(24, 4, 28, 2)`` trains epochs 0-3 at 24 px, 4-5 at 28 px, the rest as loaded.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from quicktrain.techniques.base import Technique


class ProgressiveResize(Technique):
    name = "low_res"

    def __init__(self, low_res: int | None, epochs: int, mid_res: int | None = None, mid_epochs: int = 0) -> None:
        self.low_res = low_res
        self.epochs = epochs if low_res else 0
        self.mid_res = mid_res
        self.mid_epochs = mid_epochs if mid_res else 0
        self.size: int | None = None  # the size this epoch trains at; None: as loaded

    @property
    def active(self) -> bool:
        return self.epochs + self.mid_epochs > 0

    def set_epoch(self, epoch: int) -> None:
        """``epoch``: 0-based index of the epoch about to run."""
        if epoch < self.epochs:
            self.size = self.low_res
        elif epoch < self.epochs + self.mid_epochs:
            self.size = self.mid_res
        else:
            self.size = None

    def start_epoch(self, epoch: int) -> None:
        self.set_epoch(epoch)

    def micro_input(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)

    def banner(self) -> str | None:
        stages = [f"{self.epochs} at {self.low_res} px"] if self.epochs else []
        stages += [f"{self.mid_epochs} at {self.mid_res} px"] if self.mid_epochs else []
        return f"the first epochs {', then '.join(stages)} (downscaled on the device)" if stages else None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.size is None or x.shape[-1] == self.size:
            return x
        # antialiased: a plain bilinear downscale aliases (it skips pixels instead of averaging them)
        return F.interpolate(x, size=(self.size, self.size), mode="bilinear", antialias=True, align_corners=False)


def resolve(cfg: Any, device: Any = None, distributed: Any = None) -> ProgressiveResize:
    data = cfg.data
    return ProgressiveResize(data.low_res, data.low_res_epochs, data.mid_res, data.mid_res_epochs)
