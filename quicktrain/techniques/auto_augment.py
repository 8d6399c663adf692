"""Automatic augmentation policies (``--auto-augment``) and random erasing (``--reprob``) on the
uint8 training batch, on its device, after the crop and flip and before MixUp/CutMix.

Policies are named as timm names them and run torchvision's operations:

- ``rand-m{M}[-n{N}][-mstd{S}]``: RandAugment, N operations per image (default 2) at magnitude
  M on timm's 0-10 scale (torchvision's 31 bins: bin ``round(3 * M)``), each image's magnitude
  drawn from a normal around M with standard deviation S (``mstd``, clipped to 0-10), as timm's
  ``rand-m9-mstd0.5``;
- ``trivial``: TrivialAugment (one operation per image, magnitude uniform).

Random erasing (Zhong et al., timm's ``--reprob``): with probability P one rectangle of 2-33 %
of the image, aspect ratio 0.3-3.3 (log-uniform), is filled with random bytes (timm's "pixel"
mode, in uint8).

Everything random comes from a generator seeded by (run seed, optimizer update, position in the
update's batch): arms that differ in accumulation or layout, and resumed runs, see the same
augmented images (the data order is already a function of seed and epoch).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from quicktrain.errors import ConfigError
from quicktrain.techniques.base import Technique

_SALT_POLICY, _SALT_ERASE = 0x6175746F, 0x65726173  # "auto", "eras"
_RAND = re.compile(r"^rand(?P<rest>(-[a-z]+[0-9.]+)*)$")


@dataclass(frozen=True)
class Policy:
    """A parsed ``--auto-augment`` string."""

    kind: str  # "rand" or "trivial"
    magnitude: float = 9.0  # timm's 0-10 scale
    ops: int = 2
    mstd: float = 0.0

    def describe(self) -> str:
        if self.kind == "trivial":
            return "TrivialAugment (1 op per image)"
        noise = f", magnitude noise std {self.mstd:g}" if self.mstd else ""
        return f"RandAugment ({self.ops} ops per image, magnitude {self.magnitude:g}/10{noise})"


def parse_policy(text: str) -> Policy:
    """``rand-m9-mstd0.5`` -> Policy("rand", 9, 2, 0.5); ``trivial`` -> Policy("trivial")."""
    if text == "trivial":
        return Policy("trivial")
    match = _RAND.match(text)
    if not match:
        raise ConfigError(
            f"data.auto_augment='{text}' is not a policy quicktrain runs; accepted: rand-m<M>[-n<N>][-mstd<S>] "
            "(timm's RandAugment strings, e.g. rand-m9-mstd0.5) or trivial"
        )
    values: dict[str, float] = {}
    for part in filter(None, match.group("rest").split("-")):
        key = part.rstrip("0123456789.")
        if key not in ("m", "n", "mstd") or key in values:
            raise ConfigError(f"data.auto_augment='{text}': '{part}' is not one of m<M>, n<N>, mstd<S> (each once)")
        values[key] = float(part[len(key) :])
    m, n, s = values.get("m", 9.0), values.get("n", 2.0), values.get("mstd", 0.0)
    if not (0 <= m <= 10 and n >= 1 and n == int(n) and s >= 0):
        raise ConfigError(f"data.auto_augment='{text}': needs 0 <= m <= 10, a whole n >= 1, mstd >= 0")
    return Policy("rand", m, int(n), s)


def erase_box(rng: np.random.Generator, h: int, w: int) -> tuple[int, int, int, int] | None:
    """One random-erasing rectangle (top, left, height, width) in an h x w image, or None when
    ten tries found none that fits (as timm and torchvision give up)."""
    for _ in range(10):
        area = rng.uniform(0.02, 1 / 3) * h * w
        ratio = math.exp(rng.uniform(math.log(0.3), math.log(1 / 0.3)))
        eh, ew = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
        if 0 < eh < h and 0 < ew < w:
            return int(rng.integers(0, h - eh + 1)), int(rng.integers(0, w - ew + 1)), eh, ew
    return None


@dataclass(frozen=True)
class AutoAugment(Technique):
    active: bool
    policy: Policy | None = None
    reprob: float = 0.0
    seed: int = 0
    name = "auto_augment"

    def _transform(self, rng: np.random.Generator) -> Any:
        from torchvision.transforms import v2

        if self.policy.kind == "trivial":
            return v2.TrivialAugmentWide()
        m = self.policy.magnitude
        if self.policy.mstd:
            m = float(np.clip(rng.normal(m, self.policy.mstd), 0, 10))
        return v2.RandAugment(num_ops=self.policy.ops, magnitude=round(3 * m), num_magnitude_bins=31)

    @torch.no_grad()
    def transform(self, images: torch.Tensor, targets: torch.Tensor, update: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.active:
            return images, targets
        out = images.clone()
        h, w = images.shape[-2:]
        for i in range(len(images)):
            if self.policy is not None:
                rng = np.random.default_rng([self.seed, update, i, _SALT_POLICY])
                transform = self._transform(rng)
                with torch.random.fork_rng(devices=[]):  # torchvision draws from the global generator
                    torch.manual_seed(int(rng.integers(2**62)))
                    out[i] = transform(out[i])
            if self.reprob:
                rng = np.random.default_rng([self.seed, update, i, _SALT_ERASE])
                box = erase_box(rng, h, w) if rng.random() < self.reprob else None
                if box is not None:  # the noise drawn on the batch's device: no host-to-device copy to wait for
                    top, left, eh, ew = box
                    generator = torch.Generator(device=out.device).manual_seed(int(rng.integers(2**62)))
                    shape = (out.shape[1], eh, ew)
                    noise = torch.randint(0, 256, shape, generator=generator, device=out.device, dtype=torch.uint8)
                    out[i, :, top : top + eh, left : left + ew] = noise
        return out, targets

    def banner(self) -> str | None:
        if not self.active:
            return None
        parts = [self.policy.describe()] if self.policy else []
        parts += [f"random erasing p={self.reprob:g} (random bytes)"] if self.reprob else []
        return f"on ({' + '.join(parts)}; per image, drawn per (seed, update, position), before any MixUp)"

    def record(self) -> dict[str, object]:
        return {"auto_augment": self.policy.describe() if self.policy else None, "reprob": self.reprob}


def resolve(cfg, device: torch.device, distributed=None) -> AutoAugment:
    text, reprob = cfg.data.auto_augment, cfg.data.reprob
    policy = parse_policy(text) if text else None
    return AutoAugment(policy is not None or reprob > 0, policy, reprob, cfg.run.seed)


def resolve_erasing_arm(cfg, device: torch.device, distributed=None) -> Technique:
    """``reprob`` as its own ablation arm: :class:`AutoAugment` does the work."""
    return _ErasingArm(cfg.data.reprob > 0)


@dataclass(frozen=True)
class _ErasingArm(Technique):
    active: bool
    name = "reprob"
