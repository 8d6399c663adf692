#!/usr/bin/env bash
# pilots on core 1, one thread, worktree 3b2a10c (the recipe with reflect padding), seed 0
P=benchmarks/results/recipe-pilots-cpu/pilot_full.sh
export WORKTREE=../measure10 CORE=1
bash $P full_muon_full7_s0 --low-res-epochs 0 --epochs 7 --eval-every 7
bash $P full_muon_b1024_m012_08_s0 --batch-size 1024 --muon-lr 0.12 --muon-momentum 0.8 --eval-every 8
