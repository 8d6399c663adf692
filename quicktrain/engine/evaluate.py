"""Evaluation on held-out data: loss, accuracy and macro-F1, under the training precision."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from quicktrain.data.prepare import InputPipeline
from quicktrain.metrics import accuracy, confusion_matrix, macro_f1
from quicktrain.techniques.precision import Precision


@dataclass(frozen=True)
class EvalResult:
    loss: float
    accuracy: float
    f1_macro: float
    samples: int


@torch.no_grad()
def evaluate(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    inputs: InputPipeline,
    precision: Precision,
    num_classes: int,
    reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> EvalResult:
    """Loss, accuracy and macro-F1 over ``batches``; ``reduce`` sums the counts over
    data-parallel processes that each evaluated their shard."""
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), device=inputs.device, dtype=torch.float64)
    cm = torch.zeros(num_classes, num_classes, dtype=torch.long, device=inputs.device)
    for batch in batches:
        x, y = inputs.to_device(batch)
        with precision.autocast():
            logits = model(inputs(x))
        # loss in fp32 so the reported number does not depend on the AMP dtype's rounding
        loss_sum += nn.functional.cross_entropy(logits.float(), y, reduction="sum")
        cm += confusion_matrix(logits.argmax(1), y, num_classes)
    model.train(was_training)
    if reduce is not None:
        reduce(cm)
        reduce(loss_sum)
    n = int(cm.sum())
    return EvalResult(float(loss_sum) / max(n, 1), accuracy(cm), macro_f1(cm), n)
