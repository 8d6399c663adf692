#!/usr/bin/env bash
# Issue 33, RQ1 for the three families: each technique of the grid's optimised arm alone.
#
#   bash benchmarks/rq1_grid.sh GRID OUT [DATASET] [REPEATS]     # DATASET: the CIFAR-10 JPEG copy or mnist5k
#
# GRID is a finished benchmarks/rq_grid.sh folder: its baseline runs (fp32, no accumulation) are
# linked in, so each ablation here runs only its one new arm per seed, with the grid's job, subset,
# targets and seeds:
#   bf16  = bf16 autocast + the layout autotune chose for the model (GRID/autotune-MODEL.yaml)
#   accum = 2 accumulation steps, fp32
# (bf16 + accum together is the grid's `opt` arm; pinned memory is a no-op on a CPU-only host.)
# The baselines ran earlier, so a rerun of efficientnet_b0's baseline seed 0 (OUT/drift) comes
# first (arm `again`, identical to the baseline): its time against the grid's says how much the
# machine's speed moved in between.
set -euo pipefail
GRID=${1:?usage: rq1_grid.sh GRID OUT [DATASET] [REPEATS]}
OUT=${2:?usage: rq1_grid.sh GRID OUT [DATASET] [REPEATS]}
DATASET=${3:-imagefolder:../shared/datasets/cifar10-jpeg}
REPEATS=${4:-3}
CORE=${CORE:-1}
export OMP_NUM_THREADS=1
run() { taskset -c "$CORE" python -m quicktrain "$@"; }
mkdir -p "$OUT"
# the same jobs, targets and baseline arm as rq_grid.sh
source "$(dirname "$0")/rq_jobs.sh"
SLUG=$(python -c "import sys; from quicktrain.records import dataset_slug; print(dataset_slug(sys.argv[1]))" "$DATASET")
off=$BASELINE_OFF
ablate() {  # model args target out switch
  # shellcheck disable=SC2086
  run ablate --techniques "${5%%=*}" --switch "$5/$off" --models "$1" --datasets "$DATASET" \
    --repeats "$6" --batch-size "$BATCH" $2 $SUBSET --target-accuracy "$3" --no-stop-at-target \
    --eval-every-steps "$EVAL" --no-progress --out "$4"
}
IFS='|' read -r model args target <<<"${JOBS[2]}"
mkdir -p "$OUT/drift/runs"
[[ -e "$OUT/drift/runs/${model}__${SLUG}__baseline__r0" ]] || cp -al "$GRID/$model/runs/${model}__${SLUG}__baseline__r0" "$OUT/drift/runs/"
[[ -f "$OUT/drift/done" ]] || { ablate "$model" "$args" "$target" "$OUT/drift" \
  "again=$BASELINE_OFF" 1 \
  && touch "$OUT/drift/done"; }

for repeats in $(seq 1 "$REPEATS"); do
  for job in "${JOBS[@]}"; do
    IFS='|' read -r model args target <<<"$job"
    cl=$(autotuned techniques.channels_last "$GRID/autotune-$model.yaml")
    for arm in bf16 accum; do
      dest="$OUT/$model-$arm"
      link_baselines "$GRID/$model" "$dest"  # the grid's baselines, linked once
      sw=$(rq1_switch "$arm" "$cl")
      ablate "$model" "$args" "$target" "$dest" "$sw" "$repeats"
    done
  done
done
