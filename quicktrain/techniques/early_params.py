"""Parameters trained for the first epochs only, then held fixed: airbench trains its whitening
layer's bias for the first 3 epochs and freezes it after. Chosen by name (a glob over
``model.named_parameters()``, e.g. ``whiten.bias``); they train even where the model leaves
them frozen, so a model can keep them fixed by default and a recipe can open them early.

Once fixed they get no gradient: the optimizer skips them, and autograd skips whatever backward
work only they needed. ``EarlyParams()`` (the default) does nothing.

The other way round, :meth:`EarlyParams.freeze_first` holds parameters fixed for the first epochs
and trains them after: ``--freeze-epochs N`` of a transfer run trains only the new head for N
epochs, then everything. Both kinds are in the optimizer from the start (with their state), so
a resumed run and the epoch boundary behave alike.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from torch import nn

from quicktrain.errors import ConfigError
from quicktrain.techniques.base import Built, Technique


class EarlyParams(Technique):
    name = "early_params"

    def __init__(
        self,
        params: dict[str, nn.Parameter] | None = None,
        epochs: int = 0,
        frozen: dict[str, nn.Parameter] | None = None,
        frozen_epochs: int = 0,
    ) -> None:
        self.params = params or {}
        self.epochs = epochs if self.params else 0
        self.frozen = frozen or {}  # held fixed for the first frozen_epochs, trained after
        self.frozen_epochs = frozen_epochs if self.frozen else 0

    def freeze_first(self, model: nn.Module, keep: list[str], epochs: int) -> EarlyParams:
        """Also hold every trainable parameter of ``model`` not named in ``keep`` fixed for the first
        ``epochs`` epochs (call after the optimizer is built, so they are in its groups)."""
        if epochs == 0:
            return self
        frozen = {n: p for n, p in model.named_parameters() if p.requires_grad and n not in keep}
        if len(frozen) == len([p for p in model.parameters() if p.requires_grad]):
            raise ConfigError("optim.freeze_epochs would freeze every parameter: nothing is left to train")
        out = EarlyParams(self.params, self.epochs, frozen, epochs)
        out.set_epoch(0)
        return out

    @classmethod
    def select(cls, model: nn.Module, pattern: str | None, epochs: int) -> EarlyParams:
        """The parameters of ``model`` whose names match ``pattern``, made trainable (epoch 0)."""
        if pattern is None or epochs == 0:
            return cls()
        names = dict(model.named_parameters())
        chosen = {name: p for name, p in names.items() if fnmatchcase(name, pattern)}
        if not chosen:
            examples = ", ".join(list(names)[:3])
            raise ConfigError(f"optim.early_params='{pattern}' matches no parameter of the model ({examples}, ...)")
        early = cls(chosen, epochs)
        early.set_epoch(0)
        return early

    @property
    def active(self) -> bool:
        return self.epochs > 0 or self.frozen_epochs > 0

    def set_epoch(self, epoch: int) -> None:
        """``epoch``: 0-based index of the epoch about to run."""
        for p in self.params.values():
            p.requires_grad_(epoch < self.epochs)
        for p in self.frozen.values():
            p.requires_grad_(epoch >= self.frozen_epochs)

    def describe(self) -> str:
        parts = [f"{', '.join(self.params)} trained for the first {self.epochs} epochs only"] if self.epochs else []
        if self.frozen_epochs:
            epochs = f"{self.frozen_epochs} epoch" + ("s" if self.frozen_epochs > 1 else "")
            parts.append(f"only the head trains for the first {epochs} ({len(self.frozen)} other tensors held fixed)")
        return "; ".join(parts)

    # ---- as a technique: chosen on the model, frozen after the optimizer is built ---------------
    pattern: str | None = None
    early_epochs: int = 0
    freeze_epochs: int = 0

    def prepare_model(self, model: nn.Module) -> nn.Module:
        chosen = EarlyParams.select(model, self.pattern, self.early_epochs)  # trainable before the groups
        self.params, self.epochs = chosen.params, chosen.epochs
        return model

    def attach(self, built: Built) -> None:
        """The new head alone first: frozen after the groups are built, so every parameter is in them."""
        frozen = self.freeze_first(built.model, built.head, self.freeze_epochs)
        self.frozen, self.frozen_epochs = frozen.frozen, frozen.frozen_epochs
        self.set_epoch(0)

    def start_epoch(self, epoch: int) -> None:
        self.set_epoch(epoch)

    def banner(self) -> str | None:
        return self.describe() if self.active else None


def resolve(cfg: Any, device: Any = None, distributed: Any = None) -> EarlyParams:
    """``optim.early_params`` / ``early_epochs`` and ``optim.freeze_epochs``; not under torchrun, where
    DDP fixes what trains when it wraps the model."""
    for key, value in (
        ("optim.early_params", cfg.optim.early_params),
        ("optim.freeze_epochs", cfg.optim.freeze_epochs),
    ):
        if value and distributed is not None and distributed.active:
            raise ConfigError(f"{key} is not supported under torchrun (DDP fixes what trains when it wraps)")
    early = EarlyParams()
    early.pattern, early.early_epochs, early.freeze_epochs = (
        cfg.optim.early_params,
        cfg.optim.early_epochs,
        cfg.optim.freeze_epochs,
    )
    return early
