"""An exponential moving average of the weights (``--model-ema DECAY``): timm's ``ModelEmaV3``.

After every optimizer update ``n`` (1 after the first) every floating-point tensor of the state
dict, BatchNorm statistics included, moves as ``ema = d * ema + (1 - d) * trained`` with

    d(n) = 0                                  for n = 1 (the average starts as the weights)
    d(n) = min(DECAY, 1 - n ** (-2/3))        with warm-up (``--model-ema-warmup``, the default)
    d(n) = DECAY                              without

(timm's ``1 - (1 + step / gamma) ** -power`` with gamma 1, power 2/3 and ``step = n - 1``).
Integer tensors (BatchNorm's batch count) are copied. timm's ``ModelEmaV3`` does the averaging
(one fused ``lerp`` over every tensor, its warm-up rule is the one above, ``tests/test_timm_pieces.py``
checks the two agree); this module adds what the protocol needs around it: the copy is made once
the model is built (:meth:`ModelEma.settle`), on its device and in its layout, evaluation scores it
as the run's result and the trained weights beside it (``raw_*``), and checkpoints keep it as a plain
state dict, so a resumed run continues the same average.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from timm.utils.model_ema import ModelEmaV3
from torch import nn

from quicktrain.techniques.base import Technique, unwrap


def ema_decay(update: int, decay: float, warmup: bool = True) -> float:
    """The decay applied after optimizer update ``update`` (1 after the first).

    >>> ema_decay(1, 0.999), round(ema_decay(2, 0.999), 4), ema_decay(10**6, 0.999)
    (0.0, 0.37, 0.999)
    """
    step = update - 1
    if step <= 0:
        return 0.0
    return min(decay, 1.0 - (1.0 + step) ** (-2.0 / 3.0)) if warmup else decay


@dataclass(frozen=True)
class ModelEma(Technique):
    """``--model-ema DECAY`` (the module's docstring has the rule). Hooks: :meth:`settle` copies the
    built model, :meth:`after_update` moves the copy, :meth:`scored_model` hands it to evaluation,
    :meth:`state_dict` / :meth:`load_state_dict` put it in checkpoints."""

    active: bool
    decay: float = 0.0
    warmup: bool = True
    average: ModelEmaV3 | None = None  # built by settle(), once the model exists
    name = "ema"

    def settle(self, model: nn.Module, techniques: Any, image_size: int, num_classes: int, device: Any) -> ModelEma:
        if not self.active:
            return self
        average = ModelEmaV3(unwrap(model), decay=self.decay, use_warmup=self.warmup)  # a deep copy, same device
        average.module.requires_grad_(False)
        return replace(self, average=average)

    @torch.no_grad()
    def after_update(self, model: nn.Module, update: int) -> None:
        if self.average is not None:
            self.average.update(unwrap(model), step=update)  # decay ema_decay(update, ...)

    def scored_model(self, model: nn.Module) -> nn.Module:
        return model if self.average is None else self.average.module

    def state_dict(self) -> dict[str, Any]:
        return {} if self.average is None else {"average": self.average.module.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.average is not None and "average" in state:
            self.average.module.load_state_dict(state["average"])  # copied into the tensors on the model's device

    def banner(self) -> str | None:
        if not self.active:
            return None
        warm = ", warm-up 1 - n^(-2/3)" if self.warmup else ""
        return f"on (EMA of the weights, decay {self.decay:g}{warm}; scored as the run, trained weights as raw_*)"

    def record(self) -> dict[str, Any]:
        return {"model_ema": self.decay if self.active else None, "model_ema_warmup": self.warmup}


def resolve(cfg, device: torch.device, distributed=None) -> ModelEma:
    decay = cfg.optim.model_ema
    return ModelEma(decay is not None, decay or 0.0, cfg.optim.model_ema_warmup)
