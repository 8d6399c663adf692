"""Weight averaging by lookahead, as the CIFAR-10 speedrun recipes use it.

Every ``every`` optimizer updates the slow weights move towards the trained (fast) ones,
``slow = decay * slow + (1 - decay) * fast``, and the fast weights restart from there
(``fast = slow``). ``decay`` grows with training progress as ``final_decay * progress**3``:
no averaging early, when the weights move fast, strong averaging near the end. After the
last update the model holds the slow weights, so evaluation and the saved model see the
average. All floating-point tensors of the state dict take part, BatchNorm statistics
included.

``resolve_averaging(None, ...)`` gives the object that does nothing. As a technique (``resolve``)
its slow weights are allocated in :meth:`Lookahead.attach`, once the run's length is known.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from quicktrain.techniques.base import Built, Technique, unwrap


class NoAveraging(Technique):
    name = "lookahead"
    active = False

    def record(self) -> dict[str, Any]:
        return {"weight_averaging": "off"}


class Lookahead(NoAveraging):
    active = True

    def __init__(self, final_decay: float, every: int, total_updates: int, model: nn.Module | None = None) -> None:
        """``model``: allocate the slow weights now, beside its tensors, so that no update allocates
        (an out-of-memory error after the optimizer step would have the retried update applied twice)."""
        self.final_decay, self.every, self.total = final_decay, every, total_updates
        self.slow: dict[str, torch.Tensor] | None = None
        self.started = False  # the slow weights hold the first averaging point's weights
        if model is not None:
            self.slow = {k: torch.empty_like(v) for k, v in self._floats(model).items()}

    def attach(self, built: Built) -> None:
        self.total = built.total_updates
        self.slow = {k: torch.empty_like(v) for k, v in self._floats(built.model).items()}

    def banner(self) -> str:
        return f"{self.final_decay:g} every {self.every} updates (the slow weights, scored and saved)"

    def record(self) -> dict[str, Any]:
        return {"weight_averaging": f"lookahead {self.final_decay}"}

    def decay(self, update: int) -> float:
        return self.final_decay * (update / self.total) ** 3

    @staticmethod
    def _floats(model: nn.Module) -> dict[str, torch.Tensor]:
        return {k: v for k, v in unwrap(model).state_dict().items() if v.is_floating_point()}

    @torch.no_grad()
    def after_update(self, model: nn.Module, update: int) -> None:
        last = update >= self.total
        if update % self.every and not last:
            return
        fast = self._floats(model)
        if self.slow is None:  # not allocated up front (no model given)
            self.slow = {k: v.detach().clone() for k, v in fast.items()}
        elif not self.started:
            for key, tensor in fast.items():
                self.slow[key].copy_(tensor)
        self.started = True
        decay = 1.0 if last else self.decay(update)  # the last one: the model takes the average
        for key, tensor in fast.items():
            slow = self.slow[key]
            slow.lerp_(tensor, 1.0 - decay)
            tensor.copy_(slow)

    def state_dict(self) -> dict[str, Any]:
        return {"slow": self.slow if self.started else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Checkpoints load on the CPU: values are copied into the slow weights allocated beside the
        live model (on its device), or taken as they are when none were allocated."""
        saved = state.get("slow")
        self.started = saved is not None
        if saved is None:
            return
        if self.slow is None:
            self.slow = saved
        else:
            for key, tensor in self.slow.items():
                tensor.copy_(saved[key])


def resolve_averaging(
    final_decay: float | None, every: int, total_updates: int, model: nn.Module | None = None
) -> NoAveraging:
    return NoAveraging() if final_decay is None else Lookahead(final_decay, every, total_updates, model)


def resolve(cfg: Any, device: Any = None, distributed: Any = None) -> NoAveraging:
    """``optim.lookahead``; the run's length comes at :meth:`Lookahead.attach`."""
    return resolve_averaging(cfg.optim.lookahead, cfg.optim.lookahead_every, 0)
