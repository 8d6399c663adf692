"""A small convolutional net sized for CIFAR, after the ideas the CIFAR-10 speedrun record
holders published (Page's ResNet, Keller Jordan's airbench), written for quicktrain.

- A first 2x2 convolution initialised to whiten the input: its filters are the eigenvectors of
  the covariance of 2x2 input patches, scaled by 1/sqrt(eigenvalue), with their negatives, so
  its outputs are decorrelated and of unit variance. It is fitted from training images before
  training (:meth:`SpeedrunNet.init_from_data`) and stays fixed (weights and bias: nothing
  behind it needs a gradient, which also spares the backward pass of the first group's input);
  ``--early-params whiten.bias --early-epochs 3`` trains the bias for the first epochs, as
  airbench does.
- Three conv groups (conv, max-pool, BatchNorm, GELU, conv, BatchNorm, GELU), widths 64/256/256,
  global max-pool, a bias-free linear head scaled down by 1/9. ``activation="silu"`` (``--model-kwargs
  activation=silu``) puts SiLU in the groups instead, as hiverge/cifar10-speedrun does.
- BatchNorm scales fixed at 1 (only the shifts learn; the recipe gives them a larger step),
  convolutions start as identity on their first input channels (Dirac init): each group
  starts close to passing its input through.
"""

from __future__ import annotations

import torch
from torch import nn

from quicktrain.errors import ConfigError
from quicktrain.models.entry import register


def _conv(cin: int, cout: int) -> nn.Conv2d:
    conv = nn.Conv2d(cin, cout, 3, padding="same", bias=False)
    with torch.no_grad():
        nn.init.dirac_(conv.weight[:cin])  # output channel i starts as input channel i
    return conv


def _norm(channels: int) -> nn.BatchNorm2d:
    norm = nn.BatchNorm2d(channels, momentum=0.4, eps=1e-12)
    norm.weight.requires_grad_(False)  # scale fixed at 1
    return norm


ACTIVATIONS = {"gelu": nn.GELU, "silu": nn.SiLU}


class ConvGroup(nn.Sequential):
    def __init__(self, cin: int, cout: int, activation: type[nn.Module] = nn.GELU) -> None:
        super().__init__(
            _conv(cin, cout),
            nn.MaxPool2d(2),
            _norm(cout),
            activation(),
            _conv(cout, cout),
            _norm(cout),
            activation(),
        )


class SpeedrunNet(nn.Module):
    def __init__(
        self, num_classes: int = 10, widths: tuple[int, int, int] = (64, 256, 256), activation: str = "gelu"
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ConfigError(f"speedrun_net: activation={activation!r} is not one of {', '.join(ACTIVATIONS)}")
        act = ACTIVATIONS[activation]
        self.whiten = nn.Conv2d(3, 24, kernel_size=2, padding=0, bias=True)
        self.whiten.requires_grad_(False)
        self.body = nn.Sequential(
            nn.GELU(),  # after the whitening layer in either case, as in airbench and Hiverge's net
            ConvGroup(24, widths[0], act),
            ConvGroup(widths[0], widths[1], act),
            ConvGroup(widths[1], widths[2], act),
            nn.AdaptiveMaxPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(widths[2], num_classes, bias=False)
        self.scale = 1 / 9

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.whiten(x))) * self.scale

    @torch.no_grad()
    def init_from_data(self, images: torch.Tensor, eps: float = 5e-4) -> None:
        """Whitening filters from ``images`` (N, 3, H, W), already normalised as in training."""
        patches = images.float().unfold(2, 2, 1).unfold(3, 2, 1)  # (N, 3, H-1, W-1, 2, 2)
        patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(-1, 12)  # one row per 2x2x3 patch
        patches = patches - patches.mean(0)
        cov = patches.T @ patches / len(patches)
        eigenvalues, eigenvectors = torch.linalg.eigh(cov)
        filters = (eigenvectors / torch.sqrt(eigenvalues + eps)).T.reshape(12, 3, 2, 2)
        self.whiten.weight.copy_(torch.cat([filters, -filters]).to(self.whiten.weight))
        self.whiten.bias.zero_()


@register("speedrun_net", "CIFAR speedrun conv net (2M params): whitened 2x2 stem, 3 conv groups, max-pool head")
def speedrun_net(num_classes: int, image_size: int, hub: bool, activation: str = "gelu") -> nn.Module:
    if hub:
        raise ValueError("speedrun_net has no published ImageNet weights; it trains from scratch")
    return SpeedrunNet(num_classes, activation=activation)
