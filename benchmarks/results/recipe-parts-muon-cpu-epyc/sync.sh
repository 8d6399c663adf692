#!/usr/bin/env bash
# copy the finished runs' records (no weights, no checkpoints) of the recipe-parts ablation into the repo, and report them
src=../measure-runs/recipe-parts; dst=benchmarks/results/recipe-parts-muon-cpu-epyc
mkdir -p $dst/runs
for d in $src/runs/*; do
  [ -f $d/summary.json ] || continue
  mkdir -p $dst/runs/$(basename $d)
  cp $d/{arm.json,config.yaml,env.json,evals.jsonl,metrics.jsonl,summary.json} $dst/runs/$(basename $d)/ 2>/dev/null
done
cp $src/ablation.json $src/ablation.csv $dst/ 2>/dev/null
OMP_NUM_THREADS=1 nice python -m quicktrain report $dst/runs --out $dst
