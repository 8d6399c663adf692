"""One record of how images become the model's inputs, resolved once per run (timm's
``resolve_data_config``): train, evaluate, predict and export all read it, none re-derives it.

It is the run summary's ``input`` and, with the model's name and classes, the ``FILE.json`` beside
every export and the ONNX file's metadata. Torch-free.

Example:
    >>> spec = InputSpec(crop="resized", size=224, image_size=224, crop_pct=0.875, store_side=256,
    ...                  mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    >>> spec.resize_to
    256
    >>> InputSpec.from_record(spec.to_record()) == spec
    True
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class InputSpec:
    crop: str  # pad: the whole image decoded to a size x size square; resized: photos, aspect kept
    size: int  # the side images are decoded (pad) or centre-cropped (resized) to: data.resolution
    image_size: int  # the side the model sees (model.image_size: resized on the device), else ``size``
    mean: tuple[float, ...] = IMAGENET_MEAN  # per channel, fractions of 255
    std: tuple[float, ...] = IMAGENET_STD
    normalization_source: str | None = None  # training split, ImageNet (pretrained weights), given
    crop_pct: float | None = None  # resized: evaluation resizes the shorter side to size / crop_pct
    store_side: int | None = None  # resized: the shorter side kept in the photo store
    store_format: str | None = None  # resized, from a store: raw pixels or jpeg (data.store_format)
    crop_scale: tuple[float, float] | None = None  # resized: RandomResizedCrop's training ranges
    crop_ratio: tuple[float, float] | None = None
    interpolation: str = "bilinear"  # antialiased when reducing
    channel_order: str = "RGB"
    layout: str = "NCHW"  # NCHW, or NHWC with channels-last
    source_sizes: dict[str, Any] | None = None  # photos: min / median / max of the source files
    notes: tuple[str, ...] = field(default_factory=tuple)  # what loading found (held-out folder, subfolders)

    @property
    def model_resize(self) -> int | None:
        """The side a decoded batch is resized to on the device for the model, None when it is the
        decode size already."""
        return self.image_size if self.image_size != self.size else None

    @property
    def resize_to(self) -> int:
        """The shorter side before the evaluation's centre crop (photos), else the decode size."""
        return math.floor(self.size / self.crop_pct) if self.crop == "resized" and self.crop_pct else self.size

    def describe_crop(self) -> str:
        if self.crop == "resized":
            return (
                f"resize the shorter side to {self.resize_to} px ({self.interpolation}, antialiased), keep the centre "
                f"{self.size} x {self.size}"
            )
        return f"resize the whole image to {self.size} x {self.size} ({self.interpolation})"

    def to_record(self) -> dict[str, Any]:
        """The summary's ``input``: every field, fields that do not apply left out."""
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}
        return {k: v for k, v in out.items() if v not in (None, [])}

    @classmethod
    def from_record(cls, record: dict[str, Any], fallback: dict[str, Any] | None = None) -> InputSpec:
        """Read back a summary's ``input``; ``fallback`` fills what records written before this one
        lacked (the image size, normalisation and layout, from the rest of the summary and config)."""
        merged = {**(fallback or {}), **record}
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in merged.items() if k in names}
        values.setdefault("image_size", values["size"])
        return cls(**values)
