"""Experiments built from many training runs: the technique ablation grid."""

from quicktrain.experiments.ablation import AblationSpec, run_ablation
from quicktrain.experiments.grid import TECHNIQUES, arms, plan

__all__ = ["TECHNIQUES", "AblationSpec", "arms", "plan", "run_ablation"]
