"""Muon for the hidden weight matrices and convolution filters, SGD for everything else, as one
optimizer (so the training step still has one ``optimizer.step``, one GradScaler and one
schedule over every parameter group).

Muon (Keller Jordan, 2024) takes the Nesterov momentum of a weight's gradient, viewed as a
matrix (a filter bank of shape (out, in, k, k) as (out, in*k*k)), and replaces it by the nearest
semi-orthogonal matrix, computed with a few Newton-Schulz iterations instead of an SVD. The
airbench94_muon recipe uses it for the convolution filters of the CIFAR speedrun network and
keeps SGD for the head, the biases and the norm layers; ``fixed_norm`` groups additionally hold
each filter bank at the Frobenius norm sqrt(out) before the step, as that recipe does (harmless
when a norm layer follows, since the output is then scale-invariant).

``torch.optim.Muon`` (torch >= 2.9) takes 2-D parameters only and quicktrain supports older torch,
so the update is written here; ``newton_schulz`` is tested against the scalar polynomial it applies
to every singular value and against the SVD's orthogonal factor.

The iteration runs in bfloat16 on CUDA, as the record holders run it, and in float32 on a CPU by
default (``--muon-precision`` chooses); ``--muon-ns-steps`` sets how many iterations (5, Keller
Jordan's; 3, airbench94_muon's and Hiverge's). On this project's AVX-512 BF16 CPU the optimizer
step alone on the speedrun net's filter banks takes ~80 ms in float32 with 5 steps against ~30 ms
in bfloat16 with 3 (``benchmarks/muon_step.py --optimizer-only``); inside the whole step at batch
512 that was within the trials' spread (bf16 / fp32 throughput 0.98 [0.94-1.03], one thread), and
inside the Muon recipe's step at batch 1024, 3 bf16 steps make it 1.03x faster at 32 px, 1.06x at
24 px: float32 stays the CPU default (a CPU without native bf16 would pay for it). bf16's result
stays within ~3% of fp32's.
"""

from __future__ import annotations

import torch

# the quintic of Keller Jordan's Muon: pushes every singular value in (0, 1] towards ~1 in 5 steps
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def ns_dtype(device: torch.device) -> torch.dtype:
    """The default precision of the Newton-Schulz iteration on ``device``: bfloat16 on CUDA,
    float32 elsewhere (see the module note for the CPU measurement)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def newton_schulz(
    g: torch.Tensor, steps: int = 5, eps: float = 1e-7, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """An approximately semi-orthogonal matrix with the singular vectors of the 2-D ``g``
    (singular values end between ~0.7 and ~1.2, which is what the update needs), computed in
    ``dtype`` and returned in ``g``'s."""
    a, b, c = NS_COEFFICIENTS
    x = g.to(dtype)
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.mT
    x = x / (x.norm() + eps)  # all singular values now at most 1
    for _ in range(steps):
        gram = x @ x.mT
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x.mT if tall else x).to(g.dtype)


class MuonSGD(torch.optim.Optimizer):
    """Parameter groups with ``muon: True`` take Muon steps (no weight decay: with ``fixed_norm``
    the norm is held anyway), the others SGD steps (``torch.optim.SGD``'s update, no dampening,
    ``weight_decay`` as L2 on the gradient).

    Every group has ``lr`` and ``momentum``; Muon groups also ``fixed_norm``. A learning-rate
    scheduler scales every group's ``lr`` alike, so the Muon and SGD peaks keep their ratio.
    ``dtype``: the Newton-Schulz precision, by default :func:`ns_dtype` of the parameters' device."""

    def __init__(
        self,
        groups: list[dict],
        lr: float,
        momentum: float = 0.9,
        nesterov: bool = True,
        ns_steps: int = 5,
        dtype: torch.dtype | None = None,
    ):
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=0.0, muon=False, fixed_norm=False)
        defaults["ns_steps"] = ns_steps
        super().__init__(groups, defaults)
        self.ns_dtype = dtype or ns_dtype(self.param_groups[0]["params"][0].device)

    @property
    def ns_precision(self) -> str:
        """The Newton-Schulz precision's name, as recorded ("float32", "bfloat16")."""
        return str(self.ns_dtype).removeprefix("torch.")

    # GradScaler hands a step-aware optimizer the scale and the inf flag as tensors
    # (``grad_scale``, ``found_inf``) instead of reading the flag on the host before each step:
    # with fp16 the update never waits for the device (fused Adam/SGD do the same).
    _step_supports_amp_scaling = True

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        scale = getattr(self, "grad_scale", None)  # set by GradScaler.step when grads are still scaled
        found_inf = getattr(self, "found_inf", None)  # likewise: nonzero when this update must be skipped
        skip = None if found_inf is None else found_inf.to(torch.bool)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad if scale is None else p.grad / scale.to(p.grad.dtype)
                self._update(p, grad, group, skip)
        return loss

    def _update(self, p: torch.Tensor, grad: torch.Tensor, group: dict, skip: torch.Tensor | None) -> None:
        """One parameter's step. ``skip`` (a device bool): keep the parameter and its momentum as
        they are, decided on the device with ``torch.where`` so the host never reads it."""
        if group["weight_decay"] and not group["muon"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        state = self.state[p]
        if "momentum_buffer" not in state:  # a skipped first step leaves zeros: the next step's buffer is its grad
            buf = grad.clone() if skip is None else torch.where(skip, torch.zeros_like(grad), grad)
            state["momentum_buffer"] = buf
        else:
            buf = state["momentum_buffer"]
            if skip is None:
                buf.mul_(group["momentum"]).add_(grad)
            else:
                buf.copy_(torch.where(skip, buf, buf * group["momentum"] + grad))
        update = grad.add(buf, alpha=group["momentum"]) if group["nesterov"] else buf
        if group["muon"]:
            if group["fixed_norm"]:
                factor = p.size(0) ** 0.5 / p.norm().clamp_min(1e-12)
                p.mul_(factor if skip is None else torch.where(skip, torch.ones_like(factor), factor))
            update = newton_schulz(update.reshape(len(update), -1), group["ns_steps"], dtype=self.ns_dtype)
            update = update.view_as(p)
        if skip is not None:
            update = torch.where(skip, torch.zeros_like(update), update)
        p.add_(update, alpha=-group["lr"])
