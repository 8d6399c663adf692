#!/usr/bin/env bash
# Converged time-to-target ablation of the speedrun recipe (issue 12), from the worktree at a fixed commit.
cd ../measure
export OMP_NUM_THREADS=1
exec taskset -c 1 .venv/bin/quicktrain ablate --config configs/speedrun_cifar10.yaml --techniques amp,ga \
  --repeats 3 --max-train-samples 10000 --no-channels-last --tta off --eval-every-steps 10 \
  --target-accuracy 0.76 --no-stop-at-target --max-time 1800 --no-tensorboard --no-progress \
  --out ../measure-runs/speedrun-ttt
