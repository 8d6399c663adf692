"""The device side of the input pipeline: copy, convert, normalise, resize, lay out.

Resolved once from the techniques; the training step calls it without any ``if``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from quicktrain.data.input_spec import IMAGENET_MEAN as IMAGENET_MEAN  # what pretrained weights expect
from quicktrain.data.input_spec import IMAGENET_STD as IMAGENET_STD
from quicktrain.data.input_spec import InputSpec

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


class InputPipeline:
    """uint8 (B, 3, H, W) batches on the host -> normalised float batches on ``device``."""

    def __init__(
        self,
        device: torch.device,
        non_blocking: bool = False,
        image_size: int | None = None,
        memory_format: torch.memory_format = torch.contiguous_format,
        mean: tuple[float, ...] = CIFAR_MEAN,
        std: tuple[float, ...] = CIFAR_STD,
    ) -> None:
        self.device = device
        self.non_blocking = non_blocking
        self.image_size = image_size
        self.memory_format = memory_format
        self.mean, self.std = tuple(mean), tuple(std)  # fractions of 255, per channel
        # folded so one fused multiply-add maps uint8 0..255 to (x / 255 - mean) / std
        std_t = torch.tensor(std, device=device).view(1, -1, 1, 1)
        self.scale = 1.0 / (255.0 * std_t)
        self.shift = -torch.tensor(mean, device=device).view(1, -1, 1, 1) / std_t

    @classmethod
    def from_spec(cls, spec: InputSpec, device: torch.device, non_blocking: bool = False) -> InputPipeline:
        """The pipeline a run's input record describes (resizing only when the model's size differs)."""
        layout = torch.channels_last if spec.layout == "NHWC" else torch.contiguous_format
        resize = spec.image_size if spec.image_size != spec.size else None
        return cls(device, non_blocking, resize, layout, spec.mean, spec.std)

    def to_device(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy a batch to the device; asynchronous only from pinned memory, else it would not be."""
        x, y = batch
        return (
            x.to(self.device, non_blocking=self.non_blocking),
            y.to(self.device, non_blocking=self.non_blocking),
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 on the device -> (B, 3, S, S) float32 in ``memory_format``."""
        x = x.float()
        x = torch.addcmul(self.shift, x, self.scale, out=x)  # in place: one float batch allocated, not two
        if self.image_size is not None and x.shape[-1] != self.image_size:
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False)
        return x.contiguous(memory_format=self.memory_format)
