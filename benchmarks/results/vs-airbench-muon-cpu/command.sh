#!/usr/bin/env bash
# The quiet-machine timing jobs, from the worktree at b780167, both cores, one after the other.
set -u
cd /work/measure2
PY=.venv/bin/python
mkdir -p /work/final
$PY benchmarks/vs_lightning.py --models resnet18,vit_tiny --amp bf16 --accum 1,4 --repeats 7 \
  --json /work/final/vs-lightning-cpu-quiet.json > /work/final/vs-lightning.log 2>&1
$PY benchmarks/vs_airbench.py --data ../shared/datasets/cifar10-jpeg --config configs/speedrun_muon_cifar10.yaml \
  --seeds 1 --eval-every-steps 49 --work /work/final/vs-airbench --json /work/final/vs-airbench-muon-1seed.json \
  > /work/final/vs-airbench.log 2>&1
