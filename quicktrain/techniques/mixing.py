"""MixUp and CutMix of whole batches on the device (``--mixup A --cutmix A``), as timm's
``Mixup`` in its "batch" mode, with soft-target cross-entropy.

Each optimizer update's effective batch is paired with itself reversed (image ``i`` with image
``B - 1 - i``). MixUp blends the images, ``lam * x + (1 - lam) * x_reversed`` with ``lam`` drawn
from Beta(A, A); CutMix pastes one box of the reversed batch into every image, the box's area a
``1 - lam`` share (clipped at the border; ``lam`` is then the share actually kept). The targets
are blended the same way: ``lam * onehot(y) + (1 - lam) * onehot(y_reversed)``, rows summing to
one, and cross-entropy takes them as class probabilities, label smoothing included.

Everything drawn (whether to mix, MixUp or CutMix, ``lam``, the box) comes from a generator
seeded by (run seed, update index), and the mix is applied to the whole effective batch before
it is split into micro-batches: arms that differ in accumulation, micro-batch size or layout,
and resumed runs, train on the same mixed batches.

Why not timm's ``timm.data.Mixup`` (whose "batch" mode and soft targets this follows): it draws
from NumPy's global generator, so the mix of an update depends on whatever drew before it (another
arm's accumulation, a resumed run, a data worker) and not on (seed, update); and it refuses odd
batches, which a last or out-of-memory-halved micro-batch can be. ``tests/test_timm_pieces.py``
shows both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from quicktrain.techniques.base import Technique

_SALT = 0x6D69786D  # "mixm": this generator's stream, apart from other (seed, update) draws


@dataclass(frozen=True)
class Draw:
    """What one update's mix is: nothing (``kind`` None), "mixup" or "cutmix" with its box."""

    kind: str | None
    lam: float = 1.0
    box: tuple[int, int, int, int] | None = None  # (top, bottom, left, right), CutMix only


def draw(seed: int, update: int, mixup: float, cutmix: float, prob: float, switch: float, hw: tuple[int, int]) -> Draw:
    """The mix of update ``update`` (0-based) for images of height and width ``hw``."""
    rng = np.random.default_rng([seed, update, _SALT])
    if (mixup <= 0 and cutmix <= 0) or rng.random() >= prob:
        return Draw(None)
    use_cutmix = cutmix > 0 and (mixup <= 0 or rng.random() < switch)
    lam = float(rng.beta(cutmix, cutmix) if use_cutmix else rng.beta(mixup, mixup))
    if not use_cutmix:
        return Draw("mixup", lam)
    h, w = hw
    ratio = np.sqrt(1.0 - lam)  # the box's sides: an area of 1 - lam before clipping
    cut_h, cut_w = int(h * ratio), int(w * ratio)
    cy, cx = int(rng.integers(h)), int(rng.integers(w))
    top, bottom = int(np.clip(cy - cut_h // 2, 0, h)), int(np.clip(cy + cut_h // 2, 0, h))
    left, right = int(np.clip(cx - cut_w // 2, 0, w)), int(np.clip(cx + cut_w // 2, 0, w))
    kept = 1.0 - (bottom - top) * (right - left) / (h * w)  # the share of each image left as it was
    return Draw("cutmix", kept, (top, bottom, left, right))


def mix_batch(
    images: torch.Tensor, labels: torch.Tensor, d: Draw, num_classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``images`` (B, C, H, W) uint8 or float, ``labels`` (B,) class indices -> the mixed batch
    (float for MixUp, the input's dtype for CutMix) and (B, num_classes) float targets."""
    # scatter, not F.one_hot: one_hot checks the labels' range with a host read on a CPU
    onehot = torch.zeros(len(labels), num_classes, device=labels.device).scatter_(1, labels[:, None], 1.0)
    if d.kind is None:
        return images, onehot
    partner = images.flip(0)
    if d.kind == "mixup":
        mixed = images.to(torch.float32, copy=True).lerp_(
            partner.float(), 1.0 - d.lam
        )  # unnormalised: the pipeline normalises after
    else:
        top, bottom, left, right = d.box
        mixed = images.clone()
        mixed[..., top:bottom, left:right] = partner[..., top:bottom, left:right]
    return mixed, onehot.lerp_(onehot.flip(0), 1.0 - d.lam)


@dataclass(frozen=True)
class BatchMix(Technique):
    """``--mixup`` / ``--cutmix`` (the module's docstring has the rule). Hooks: :meth:`settle` learns
    the number of classes, :meth:`transform` mixes each effective batch and returns its soft targets."""

    active: bool
    mixup: float = 0.0
    cutmix: float = 0.0
    prob: float = 1.0
    switch: float = 0.5
    seed: int = 0
    num_classes: int = 0  # known once the data is loaded (settle)
    name = "mixup"

    def settle(self, model: Any, techniques: Any, image_size: int, num_classes: int, device: Any) -> BatchMix:
        return replace(self, num_classes=num_classes)

    def transform(self, images: torch.Tensor, targets: torch.Tensor, update: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.active:
            return images, targets
        d = draw(self.seed, update, self.mixup, self.cutmix, self.prob, self.switch, tuple(images.shape[-2:]))
        return mix_batch(images, targets, d, self.num_classes)

    def banner(self) -> str | None:
        if not self.active:
            return None
        parts = [f"MixUp alpha {self.mixup:g}"] if self.mixup else []
        parts += [f"CutMix alpha {self.cutmix:g}"] if self.cutmix else []
        switch = f", CutMix on {self.switch:.0%} of them" if self.mixup and self.cutmix else ""
        return (
            f"on ({' + '.join(parts)}; {self.prob:.0%} of updates{switch}; whole batch with its reverse, on the"
            " device, drawn per (seed, update); soft-target cross-entropy)"
        )

    def record(self) -> dict[str, Any]:
        return {
            "mixup": self.mixup,
            "cutmix": self.cutmix,
            "mixup_prob": self.prob if self.active else None,
            "mixup_switch_prob": self.switch if self.active and self.mixup and self.cutmix else None,
        }


@dataclass(frozen=True)
class CutMixArm(Technique):
    """``cutmix`` as its own ablation arm: :class:`BatchMix` (the ``mixup`` entry) does the work."""

    active: bool
    name = "cutmix"


def resolve(cfg, device: torch.device, distributed=None) -> BatchMix:
    d = cfg.data
    on = d.mixup > 0 or d.cutmix > 0
    return BatchMix(on, d.mixup, d.cutmix, d.mixup_prob, d.mixup_switch_prob, cfg.run.seed)


def resolve_cutmix_arm(cfg, device: torch.device, distributed=None) -> CutMixArm:
    return CutMixArm(cfg.data.cutmix > 0)
