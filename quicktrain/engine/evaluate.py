"""Evaluation on held-out data: loss, accuracy, macro-F1, top-5 (more than 5 classes) and the
confusion matrix, under the training precision,
optionally with test-time augmentation (the logits averaged over mirrored and shifted views)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from quicktrain.data.prepare import InputPipeline
from quicktrain.errors import ConfigError
from quicktrain.metrics import accuracy, confusion_matrix, macro_f1, topk_correct


@dataclass(frozen=True)
class EvalResult:
    loss: float
    accuracy: float
    f1_macro: float
    samples: int
    top5: float | None = None  # with more than 5 classes
    confusion: torch.Tensor | None = None  # (C, C) counts, rows = true class


def plain(model: nn.Module, x: torch.Tensor, base: torch.Tensor | None = None) -> torch.Tensor:
    return model(x) if base is None else base


def mirrored(model: nn.Module, x: torch.Tensor, base: torch.Tensor | None = None) -> torch.Tensor:
    """Mean logits of the image and its left-right mirror (``base``: the image's own logits, if
    already computed)."""
    return 0.5 * (plain(model, x, base) + model(_same_layout(x.flip(-1), x)))


def _same_layout(view: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``view`` dense in ``like``'s memory format: a compiled model guards on input strides, so
    a strided crop or a flip in another layout would compile the forward once more."""
    channels_last = like.dim() == 4 and like.is_contiguous(memory_format=torch.channels_last)
    return view.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def mirrored_shifted(model: nn.Module, x: torch.Tensor, base: torch.Tensor | None = None) -> torch.Tensor:
    """Half the mirrored logits, half the mean of the mirrored logits of the image shifted by
    one pixel up-left and down-right (reflection padding): six views."""
    h, w = x.shape[-2:]
    padded = F.pad(x, (1, 1, 1, 1), mode="reflect")
    shifted = [_same_layout(padded[..., :h, :w], x), _same_layout(padded[..., 2:, 2:], x)]
    return 0.5 * mirrored(model, x, base) + 0.25 * sum(mirrored(model, s) for s in shifted)


TTA = {"off": plain, "flip": mirrored, "flip_translate": mirrored_shifted}


def least_confident(
    views: Callable[..., torch.Tensor], fraction: float
) -> Callable[[nn.Module, torch.Tensor], torch.Tensor]:
    """``views`` for the ``fraction`` of each batch whose plain prediction is least confident
    (lowest top softmax probability); the plain logits for the others. The plain view is
    computed once and reused inside ``views``."""

    def logits_of(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        base = model(x)
        k = min(len(x), math.ceil(fraction * len(x)))
        if k == 0:
            return base
        out = base.float()  # the views' mean is written into it (base itself if already float32: not read after)
        pick = out.softmax(dim=1).amax(dim=1).topk(k, largest=False).indices  # least confident first
        out[pick] = views(model, _same_layout(x[pick], x), base[pick]).float()
        return out

    return logits_of


@torch.no_grad()
def evaluate(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    inputs: InputPipeline,
    precision: Any,  # the run's precision technique: its autocast() context
    num_classes: int,
    reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
    tta: str = "off",
    tta_fraction: float = 1.0,
) -> EvalResult:
    """Loss, accuracy and macro-F1 over ``batches``; ``reduce`` sums the counts over
    data-parallel processes that each evaluated their shard; ``tta`` names a view-averaging
    function of :data:`TTA`, applied to the ``tta_fraction`` least confident images of each
    batch (:func:`least_confident`; 1: every image)."""
    if tta not in TTA:
        raise ConfigError(f"tta {tta!r}: expected one of {', '.join(TTA)}")
    logits_of = TTA[tta] if tta == "off" or tta_fraction >= 1.0 else least_confident(TTA[tta], tta_fraction)
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), device=inputs.device, dtype=torch.float64)
    cm = torch.zeros(num_classes, num_classes, dtype=torch.long, device=inputs.device)
    top5 = torch.zeros((), dtype=torch.long, device=inputs.device)
    for batch in batches:
        x, y = inputs.to_device(batch)
        with precision.autocast():
            logits = logits_of(model, inputs(x))
        # loss in fp32 so the reported number does not depend on the AMP dtype's rounding
        loss_sum += nn.functional.cross_entropy(logits.float(), y, reduction="sum")
        cm += confusion_matrix(logits.argmax(1), y, num_classes)
        if num_classes > 5:
            top5 += topk_correct(logits, y, 5)
    model.train(was_training)
    if reduce is not None:
        reduce(cm)
        reduce(loss_sum)
        reduce(top5)
    n = int(cm.sum())
    top = int(top5) / max(n, 1) if num_classes > 5 else None
    return EvalResult(float(loss_sum) / max(n, 1), accuracy(cm), macro_f1(cm), n, top, cm.cpu())
