#!/usr/bin/env bash
# usage: pilot.sh NAME [extra flags...]  -- speedrun recipe, 10k subset, core 0, one thread
name=$1; shift
cd ../main
OMP_NUM_THREADS=1 taskset -c 0 python -m quicktrain train --config configs/speedrun_cifar10.yaml --max-train-samples 10000 \
  --no-channels-last --tta off --eval-every-steps 10 --target-accuracy 0.76 --no-tensorboard --no-progress \
  --out ../pilots/$name "$@" > ../pilots/$name.log 2>&1
