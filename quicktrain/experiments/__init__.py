"""Experiments built from many training runs: the technique ablation grid and its runner,
Optuna tuning, the autotuner. Import the submodule you need (``quicktrain.experiments.ablation``);
this package imports nothing, so the CLI's ``--help`` stays free of torch."""
