"""What to do with a non-finite (NaN/Inf) loss, resolved once.

- fp16 with a GradScaler: the scaler already skips updates with non-finite gradients and
  lowers its scale.
- ``stop`` (default otherwise): no per-update sync; a flag on the device remembers the first
  bad update, and :meth:`NonFiniteGuard.check` (called every few updates and before every
  checkpoint) stops the run naming it, so the newest checkpoint is the last good one.
- ``skip``: the update is dropped (gradients zeroed, schedule not advanced), which needs one
  device sync per update to decide.
"""

from __future__ import annotations

import torch

from quicktrain.errors import TrainingError


class NonFiniteGuard:
    def __init__(self, policy: str, scaler_handles_it: bool, device: torch.device) -> None:
        self.policy = "scaler" if scaler_handles_it else policy
        self.first_bad = torch.full((), -1, dtype=torch.long, device=device)

    def allow(self, loss: torch.Tensor, update: int) -> bool:
        """Whether to apply this update (``update``: its 0-based index in the run)."""
        if self.policy == "scaler":
            return True
        finite = torch.isfinite(loss)
        if self.policy == "skip":
            return bool(finite)  # the one sync this policy costs
        bad_now = (~finite) & (self.first_bad < 0)
        # full_like fills on the device (the value is a kernel argument); torch.tensor(update,
        # device=...) would be a blocking host-to-device copy every update
        self.first_bad = torch.where(bad_now, torch.full_like(self.first_bad, update), self.first_bad)
        return True

    def check(self, last_checkpoint: str) -> None:
        """Stop the run if an update since the last check had a non-finite loss."""
        if self.policy != "stop":
            return
        first = int(self.first_bad)
        if first >= 0:
            raise TrainingError(
                f"training diverged: non-finite (NaN/Inf) loss at optimizer update {first + 1}; stopped. "
                f"Last good checkpoint: {last_checkpoint}. Lower --lr, set --grad-clip, or pass --on-nonfinite skip"
            )
