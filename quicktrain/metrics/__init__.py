"""Held-out metrics (accuracy, macro-F1) and honest timing."""

from quicktrain.metrics.classification import accuracy, confusion_matrix, macro_f1, per_class, topk_correct
from quicktrain.metrics.timing import Stopwatch, peak_memory_mb, reset_peak_memory, synchronize

__all__ = [
    "Stopwatch",
    "accuracy",
    "confusion_matrix",
    "macro_f1",
    "peak_memory_mb",
    "per_class",
    "reset_peak_memory",
    "synchronize",
    "topk_correct",
]
