#!/usr/bin/env bash
# Accuracy pilot, quicktrain alone, two threads (the side-by-side's arithmetic per seed): the recipe of 7ec1991
# (9 epochs, 4 at 24 px, cpu_allocator retain) with 8 epochs, the first 4 at 24 px: one full-size epoch fewer
# (about 6.6 full-epoch equivalents against 7.5).
cd ../measure19
for s in 0 1 2; do
  .venv/bin/python -m quicktrain train --config configs/speedrun_muon_cifar10.yaml --dataset imagefolder:$(realpath ../shared/datasets/cifar10-jpeg) \
    --seed $s --device cpu --tta flip_translate --no-progress --no-tensorboard --epochs 8 --low-res-epochs 4 \
    --out ../e8x4b/s$s > ../e8x4b/s$s.log 2>&1
done
