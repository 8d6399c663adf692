"""Parameters trained for the first epochs only, then held fixed: airbench trains its whitening
layer's bias for the first 3 epochs and freezes it after. Chosen by name (a glob over
``model.named_parameters()``, e.g. ``whiten.bias``); they train even where the model leaves
them frozen, so a model can keep them fixed by default and a recipe can open them early.

Once fixed they get no gradient: the optimizer skips them, and autograd skips whatever backward
work only they needed. ``EarlyParams()`` (the default) does nothing.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from torch import nn

from quicktrain.errors import ConfigError


class EarlyParams:
    def __init__(self, params: dict[str, nn.Parameter] | None = None, epochs: int = 0) -> None:
        self.params = params or {}
        self.epochs = epochs if self.params else 0

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
        return self.epochs > 0

    def set_epoch(self, epoch: int) -> None:
        """``epoch``: 0-based index of the epoch about to run."""
        for p in self.params.values():
            p.requires_grad_(epoch < self.epochs)

    def describe(self) -> str:
        return f"{', '.join(self.params)} trained for the first {self.epochs} epochs only"
