"""A data-bound network for loader benchmarks, as a model factory quicktrain takes by path:

    quicktrain train --model benchmarks/patchnet.py:make ...

One strided 16x16 patch convolution, ReLU, global average pooling and a linear head (the network
of ``benchmarks/photo_loader.py``): its step is many times faster than decoding an image, so a run's
images/s and data_wait_fraction are the input pipeline's.
"""

from __future__ import annotations

import torch
from torch import nn


class PatchNet(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, 64, kernel_size=16, stride=16)
        self.head = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.patch(x)).mean(dim=(2, 3)))


def make(num_classes: int, image_size: int) -> nn.Module:
    return PatchNet(num_classes)
