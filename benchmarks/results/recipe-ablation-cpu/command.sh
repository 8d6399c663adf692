#!/usr/bin/env bash
# What each ingredient of the issue-16 recipe buys (Muon, progressive resizing), as time to a
# target on held-out data: the speedrun recipe on a 10,000-image subset, 9 epochs, 3 seeds,
# from the worktree at a fixed commit, pinned to core 1 with one thread.
cd ../measure3
export OMP_NUM_THREADS=1
exec taskset -c 1 .venv/bin/quicktrain ablate --config configs/speedrun_cifar10.yaml --techniques muon,lowres \
  --switch muon=optim.optimizer=muon --switch lowres=data.low_res=24,data.low_res_epochs=3 \
  --repeats 3 --max-train-samples 10000 --no-channels-last --tta off --eval-every-steps 10 \
  --target-accuracy 0.78 --no-stop-at-target --max-time 1800 --no-tensorboard --no-progress \
  --out ../measure-runs/recipe-ablation
