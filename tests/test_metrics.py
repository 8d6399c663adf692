import pytest
import torch

from quicktrain.metrics import accuracy, confusion_matrix, macro_f1


def test_accuracy_and_macro_f1_by_hand():
    targets = torch.tensor([0, 0, 0, 1, 1, 2])
    preds = torch.tensor([0, 0, 1, 1, 2, 2])
    cm = confusion_matrix(preds, targets, 3)
    assert cm.tolist() == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert accuracy(cm) == pytest.approx(4 / 6)
    # per class F1 = 2TP / (2TP + FP + FN): 4/5, 2/4, 2/3
    assert macro_f1(cm) == pytest.approx((4 / 5 + 2 / 4 + 2 / 3) / 3)


def test_macro_f1_counts_a_never_predicted_class_as_zero():
    cm = confusion_matrix(torch.tensor([0, 0, 0, 0]), torch.tensor([0, 0, 1, 1]), 2)
    assert accuracy(cm) == 0.5
    assert macro_f1(cm) == pytest.approx((2 * 2 / (2 * 2 + 2) + 0) / 2)


def test_macro_f1_is_not_accuracy_on_imbalanced_predictions():
    targets = torch.tensor([0] * 8 + [1] * 2)
    preds = torch.zeros(10, dtype=torch.long)
    cm = confusion_matrix(preds, targets, 2)
    assert accuracy(cm) == 0.8
    assert macro_f1(cm) < 0.5
