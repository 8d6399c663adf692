#!/usr/bin/env bash
# Accuracy pilots: the recipe (8 epochs, 3 at 24 px) plus colour jitter at the 2 s A100 record's
# brightness 0.14 / contrast 0.13, seeds 0-2 (two threads, as in the side-by-side runs).
cd ../measure16   # worktree at 6c4c1d1
while pgrep -f e9_low24x5.sh > /dev/null; do sleep 20; done   # after the 9/5 pilots
mkdir -p ../jitter
for s in 0 1 2; do
  .venv/bin/python -m quicktrain train --config configs/speedrun_muon_cifar10.yaml --dataset imagefolder:$(realpath ../shared/datasets/cifar10-jpeg) \
    --seed $s --device cpu --no-progress --no-tensorboard --brightness 0.14 --contrast 0.13 \
    --out ../jitter/s$s > ../jitter/s$s.log 2>&1
done
