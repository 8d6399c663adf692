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
    return torch.bincount(flat, minlength=num_classes * num_classes).view(num_classes, num_classes)


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
