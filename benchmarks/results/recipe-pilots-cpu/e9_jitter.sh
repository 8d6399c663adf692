#!/usr/bin/env bash
# Accuracy pilots (beside other work: times say nothing): the 9-epoch recipe of b4c0705 plus colour
# jitter at the 2 s A100 record's brightness 0.14 / contrast 0.13.
cd ../measure17   # worktree at b4c0705
mkdir -p ../e9jit
for s in 0 1 2; do
  .venv/bin/python -m quicktrain train --config configs/speedrun_muon_cifar10.yaml --dataset imagefolder:$(realpath ../shared/datasets/cifar10-jpeg) \
    --seed $s --device cpu --no-progress --no-tensorboard --brightness 0.14 --contrast 0.13 \
    --out ../e9jit/s$s > ../e9jit/s$s.log 2>&1
done
