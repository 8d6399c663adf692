"""The registered networks, built on timm.

Below 64 px the nets take their small-input form, as in the CIFAR literature: ResNets get a
3x3 stride-1 stem without max-pool (a 7x7/2 stem plus pool would shrink 32 px to 8 px before
the first block), and ViTs use 4x4 patches (64 tokens at 32 px). At 64 px and up (e.g.
``--image-size 224`` with ImageNet weights) they keep their ImageNet form. Keywords
(``--drop-path``, ``--model-kwargs``) go to timm's constructors as they are.
"""

from __future__ import annotations

import timm
from timm.models.resnet import BasicBlock, ResNet
from torch import nn

from quicktrain.models.entry import register

SMALL_INPUT = 64  # below this side length, use the CIFAR form


def cifar_stem(model: ResNet) -> ResNet:
    """Replace the ImageNet stem's 7x7/2 conv with a 3x3/1 one and drop the 3x3/2 max-pool
    (a deep stem keeps its layers, its first conv becomes stride 1)."""
    if isinstance(model.conv1, nn.Sequential):
        first = model.conv1[0]
        model.conv1[0] = nn.Conv2d(first.in_channels, first.out_channels, 3, stride=1, padding=1, bias=False)
    else:
        model.conv1 = nn.Conv2d(3, model.conv1.out_channels, 3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def _resnet(arch: str, num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    model = timm.create_model(arch, pretrained=hub, num_classes=num_classes, **kwargs)
    if image_size < SMALL_INPUT:
        # a pretrained 7x7 stem does not fit a 3x3 one; it is trained from scratch
        model = cifar_stem(model)
    return model


@register("resnet18", "ResNet-18 (11M params); CIFAR stem below 64 px")
def resnet18(num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    return _resnet("resnet18", num_classes, image_size, hub, **kwargs)


@register("resnet50", "ResNet-50 (24M params); CIFAR stem below 64 px")
def resnet50(num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    return _resnet("resnet50", num_classes, image_size, hub, **kwargs)


def _vit(arch: str, num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    patch = 4 if image_size < SMALL_INPUT else 16
    # timm resamples pretrained patch and position embeddings to this size and patch
    kwargs = {"img_size": image_size, "patch_size": patch, **kwargs}
    return timm.create_model(arch, pretrained=hub, num_classes=num_classes, **kwargs)


@register("vit_tiny", "ViT-Ti (5.5M params); patch 4 below 64 px, else 16")
def vit_tiny(num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    return _vit("vit_tiny_patch16_224", num_classes, image_size, hub, **kwargs)


@register("vit_small", "ViT-S (21M params); patch 4 below 64 px, else 16")
def vit_small(num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    return _vit("vit_small_patch16_224", num_classes, image_size, hub, **kwargs)


@register("vit_base", "ViT-B (86M params); patch 4 below 64 px, else 16 (the study's ViT-B/16 at 224)")
def vit_base(num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    return _vit("vit_base_patch16_224", num_classes, image_size, hub, **kwargs)


@register("efficientnet_b0", "EfficientNet-B0 (4M params), timm's ImageNet architecture")
def efficientnet_b0(num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    return timm.create_model("efficientnet_b0", pretrained=hub, num_classes=num_classes, **kwargs)


# ---- tiny models for tests: same families, a few hundred thousand parameters at most ----
@register("test_resnet", "tiny ResNet (deep 8-16 stem, BasicBlock x4, 8-64 channels)", test=True)
def test_resnet(num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    shape = dict(layers=(1, 1, 1, 1), channels=(8, 16, 32, 64), stem_type="deep", stem_width=8)
    model = ResNet(BasicBlock, num_classes=num_classes, **{**shape, **kwargs})
    return cifar_stem(model) if image_size < SMALL_INPUT else model


@register("test_vit", "tiny ViT (2 blocks, width 32, 4x4 patches grid); BatchNorm-free", test=True)
def test_vit(num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    shape = dict(img_size=image_size, patch_size=max(image_size // 4, 1), embed_dim=32, depth=2, num_heads=2)
    return VisionTransformer(num_classes=num_classes, **{**shape, "mlp_ratio": 2.0, **kwargs})


@register("test_efficientnet", "timm's test_efficientnet (0.1M params)", test=True)
def test_efficientnet(num_classes: int, image_size: int, hub: bool, **kwargs) -> nn.Module:
    return timm.create_model("test_efficientnet", num_classes=num_classes, **kwargs)
