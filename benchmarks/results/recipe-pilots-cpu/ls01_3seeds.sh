#!/usr/bin/env bash
# label smoothing 0.1 on the recipe at 2abccef, seeds 0-2, two threads, one after another (nothing else running)
cd ../measure11
for s in 0 1 2; do
  .venv/bin/quicktrain train --config configs/speedrun_muon_cifar10.yaml --label-smoothing 0.1 --seed $s \
    --eval-every 8 --no-tensorboard --no-progress --out ../pilots/full/ls01_2t_s$s > ../pilots/full/ls01_2t_s$s.log 2>&1
done
