#!/usr/bin/env bash
# fifth-round pilots, worktree 2abccef (batch 1024, Muon 0.12/0.8, gemm_wgrad), seed 0, one thread each
P=benchmarks/results/recipe-pilots-cpu/pilot_full.sh
WORKTREE=../measure11 CORE=0 bash $P full_b1024_nolookahead_s0 --lookahead none --eval-every 8 &
WORKTREE=../measure11 CORE=1 bash $P full_b1024_ls01_s0 --label-smoothing 0.1 --eval-every 8 &
wait
