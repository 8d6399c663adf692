#!/usr/bin/env bash
# Accuracy only (times say nothing: run beside other work): the recipe with 9 epochs, the first 4 at 24 px.
cd ../measure15
for s in 0 1 2; do
  .venv/bin/python -m quicktrain train --config configs/speedrun_muon_cifar10.yaml --dataset imagefolder:$(realpath ../shared/datasets/cifar10-jpeg) \
    --seed $s --device cpu --tta flip_translate --no-progress --no-tensorboard --epochs 9 --low-res-epochs 4 \
    --out ../e9/s$s > ../e9/s$s.log 2>&1
done
