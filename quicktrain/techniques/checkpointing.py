"""Gradient checkpointing (``--grad-checkpointing``): activations of each block are recomputed in
the backward pass instead of kept, trading about a third more compute for memory; timm models
(and factories whose model has ``set_grad_checkpointing``) switch it on themselves."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from quicktrain.errors import ConfigError
from quicktrain.techniques.base import Technique


@dataclass(frozen=True)
class GradCheckpointing(Technique):
    active: bool
    name = "grad_ckpt"

    def prepare_model(self, model: nn.Module) -> nn.Module:
        if not self.active:
            return model
        if not callable(getattr(model, "set_grad_checkpointing", None)):
            raise ConfigError(
                f"model.grad_checkpointing: {type(model).__name__} has no set_grad_checkpointing(); timm models "
                "have it (add one to your factory's model to use it)"
            )
        model.set_grad_checkpointing(True)
        return model

    def banner(self) -> str | None:
        return "on (activations recomputed in the backward pass)" if self.active else None

    def record(self) -> dict[str, object]:
        return {"grad_checkpointing": self.active}


def resolve(cfg, device: torch.device, distributed=None) -> GradCheckpointing:
    return GradCheckpointing(cfg.model.grad_checkpointing)
