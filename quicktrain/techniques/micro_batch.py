"""``--micro-batch-size auto``: the largest micro-batch that fits, then accumulation to reach
the effective batch.

Candidates are the divisors of the per-process batch, largest first (a micro-batch that does
not divide the batch would make the last window short). On CUDA each candidate is probed with
a real forward/backward at the run's input size, backing off on out-of-memory. On a CPU an
out-of-memory error kills the process instead of raising, so a candidate fits when an estimate
(parameters, gradients and optimizer state, plus activations measured per sample on a forward
of two samples) stays within a budget: half the available memory, or ``QUICKTRAIN_CPU_MEMORY_MB``.
The model's weights and buffers (BatchNorm statistics) are restored after probing.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from quicktrain.errors import TrainingError
from quicktrain.techniques.precision import Precision


def largest_fitting(batch: int, fits: Callable[[int], bool]) -> int:
    """The largest divisor of ``batch`` for which ``fits(size)`` holds.

    >>> largest_fitting(128, lambda m: m <= 24)
    16
    """
    for size in sorted((d for d in range(1, batch + 1) if batch % d == 0), reverse=True):
        if fits(size):
            return size
    raise TrainingError(f"not even a micro-batch of 1 fits in memory (batch {batch}); use a smaller model or input")


def cpu_budget_bytes() -> int:
    """``QUICKTRAIN_CPU_MEMORY_MB``, else half of MemAvailable (Linux), else 4 GiB."""
    if "QUICKTRAIN_CPU_MEMORY_MB" in os.environ:
        return int(float(os.environ["QUICKTRAIN_CPU_MEMORY_MB"]) * 2**20)
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 // 2
    return 4 * 2**30


class Prober:
    """Tries micro-batch sizes on the real model with generated inputs of the run's shape."""

    def __init__(
        self, model: nn.Module, precision: Precision, image_size: int, num_classes: int, device: torch.device
    ) -> None:
        self.model, self.precision, self.device = model, precision, device
        self.image_size, self.num_classes = image_size, num_classes

    def _loss(self, size: int) -> torch.Tensor:
        x = torch.randn(size, 3, self.image_size, self.image_size, device=self.device)
        y = torch.randint(0, self.num_classes, (size,), device=self.device)
        with self.precision.autocast():
            return nn.functional.cross_entropy(self.model(x), y)

    def _step(self, size: int) -> None:
        self._loss(size).backward()

    def _layer_outputs(self, size: int) -> list[torch.Tensor]:
        """Every leaf module's output tensor on a forward of ``size`` samples."""
        outputs: list[torch.Tensor] = []
        hooks = [
            m.register_forward_hook(lambda _m, _i, out: outputs.append(out) if torch.is_tensor(out) else None)
            for m in self.model.modules()
            if not list(m.children())
        ]
        try:
            with torch.no_grad():
                self._loss(size)
        finally:
            for hook in hooks:
                hook.remove()
        return outputs

    def cuda_fits(self, size: int) -> bool:
        try:
            self._step(size)
            return True
        except torch.OutOfMemoryError:
            return False
        finally:
            self.model.zero_grad(set_to_none=True)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def cpu_estimate(self) -> Callable[[int], int]:
        """Bytes a micro-batch of ``size`` needs: fixed (weights, gradients, two optimizer
        buffers) + per sample (every layer's output, kept for the backward, and its gradient)."""
        fixed = 4 * sum(p.numel() * p.element_size() for p in self.model.parameters())
        outputs = self._layer_outputs(2)
        activations = sum(o.numel() * o.element_size() for o in outputs) // 2  # of one sample
        per_sample = 2 * activations  # kept for the backward, plus their gradients
        return lambda size: fixed + size * per_sample

    def choose(self, batch: int) -> tuple[int, str]:
        """(micro-batch size, how it was decided), leaving the model as it was."""
        saved = copy.deepcopy(self.model.state_dict())
        try:
            if self.device.type == "cuda":
                return largest_fitting(batch, self.cuda_fits), "largest that ran a real step on the GPU"
            estimate, budget = self.cpu_estimate(), cpu_budget_bytes()
            size = largest_fitting(batch, lambda m: estimate(m) <= budget)
            return size, f"estimated {estimate(size) / 2**20:.0f} MB of a {budget / 2**20:.0f} MB CPU budget"
        finally:
            self.model.load_state_dict(saved)
            self.model.zero_grad(set_to_none=True)
