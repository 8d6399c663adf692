"""Accuracy and macro-F1 from a confusion matrix accumulated on the device.

Example:
    >>> cm = confusion_matrix(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]), 2)
    >>> round(accuracy(cm), 4), round(macro_f1(cm), 4)
    (0.6667, 0.6667)
"""

from __future__ import annotations

import torch


def confusion_matrix(preds: torch.Tensor, targets: torch.Tensor, num_classes: int) -> torch.Tensor:
    """(C, C) int64 counts, rows = true class, columns = predicted class."""
    flat = targets.long() * num_classes + preds.long()
    # index_add_ into a fixed size: bincount sizes its output from the largest value, which on CUDA
    # means reading it on the host (a sync every evaluation batch)
    counts = torch.zeros(num_classes * num_classes, dtype=torch.long, device=flat.device)
    return counts.index_add_(0, flat, torch.ones_like(flat)).view(num_classes, num_classes)


def accuracy(cm: torch.Tensor) -> float:
    total = int(cm.sum())
    return int(cm.diag().sum()) / total if total else 0.0


def macro_f1(cm: torch.Tensor) -> float:
    """Unweighted mean over classes of 2TP / (2TP + FP + FN); a class never seen nor
    predicted scores 0 (as scikit-learn's zero_division=0)."""
    cm = cm.double()
    tp = cm.diag()
    fp = cm.sum(0) - tp
    fn = cm.sum(1) - tp
    denom = 2 * tp + fp + fn
    f1 = torch.where(denom > 0, 2 * tp / denom.clamp(min=1), torch.zeros_like(tp))
    return float(f1.mean())


def per_class(cm: torch.Tensor, classes: list[str] | tuple[str, ...]) -> list[dict[str, float | int | str]]:
    """Precision, recall, F1 and support of every class (rows of ``cm`` are the true classes).

    >>> cm = confusion_matrix(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]), 2)
    >>> [round(r["precision"], 2) for r in per_class(cm, ["a", "b"])]
    [1.0, 0.5]
    """
    cm = cm.double().cpu()
    tp = cm.diag()
    predicted, actual = cm.sum(0), cm.sum(1)
    rows = []
    for i, name in enumerate(classes):
        p = float(tp[i] / predicted[i]) if predicted[i] > 0 else 0.0
        r = float(tp[i] / actual[i]) if actual[i] > 0 else 0.0
        f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
        rows.append({"class": str(name), "precision": p, "recall": r, "f1": f1, "support": int(actual[i])})
    return rows


def topk_correct(logits: torch.Tensor, targets: torch.Tensor, k: int) -> torch.Tensor:
    """How many targets are among the ``k`` highest logits (a device tensor, no sync)."""
    return (logits.topk(k, dim=1).indices == targets[:, None]).any(dim=1).sum()
