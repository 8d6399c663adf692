#!/usr/bin/env bash
# usage: [WORKTREE=../measure4] [CORE=0] pilot_full.sh NAME [extra flags...] -- the Muon candidate
# on the full JPEG CIFAR-10 splits, one seed, one core, one thread, from a worktree at a fixed commit
# (accuracy pilot: its times are one-thread times, not comparable with the two-core vs_airbench figures)
name=$1; shift
cd "${WORKTREE:-../measure3}"
mkdir -p ../pilots/full
OMP_NUM_THREADS=1 taskset -c "${CORE:-0}" .venv/bin/quicktrain train --config configs/speedrun_muon_cifar10.yaml \
  --eval-every 1 --no-tensorboard --no-progress --out ../pilots/full/$name "$@" > ../pilots/full/$name.log 2>&1
