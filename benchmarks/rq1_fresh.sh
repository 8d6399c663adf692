#!/usr/bin/env bash
# Issue 33, RQ1 with its own baselines: bf16 alone and 2-step accumulation alone against the fp32
# baseline, all three arms run here, seeds interleaved: for a machine other than the one that ran
# the grid (benchmarks/rq1_grid.sh links the grid's baselines in instead, on the grid's machine).
#
#   bash benchmarks/rq1_fresh.sh TUNED OUT [DATASET] [REPEATS]    # DATASET: mnist5k or the CIFAR-10 JPEG copy
#
# TUNED holds the grid's autotune-MODEL.yaml per model (benchmarks/rq_grid.sh): the layout it chose
# with bf16 (channels-last or not) goes with the bf16 arm, as in the grid's `opt` arm. Jobs, subset,
# targets and the baseline's overrides are rq_grid.sh's (benchmarks/rq_jobs.sh). Per model:
#   OUT/MODEL-bf16   baseline (fp32, no accumulation, contiguous, the torch loader) and
#                    bf16 (bf16 autocast + the tuned layout)
#   OUT/MODEL-accum  accum (2 accumulation steps: half-size micro-batches, same update, fp32), against
#                    the same baseline runs (linked from MODEL-bf16, not rerun)
# Both together is the grid's `opt` arm, measured on the grid's machine against its own baseline.
# Re-running continues.
set -euo pipefail
TUNED=${1:?usage: rq1_fresh.sh TUNED OUT [DATASET] [REPEATS]}
OUT=${2:?usage: rq1_fresh.sh TUNED OUT [DATASET] [REPEATS]}
DATASET=${3:-mnist5k}
REPEATS=${4:-3}
CORE=${CORE:-1}
export OMP_NUM_THREADS=1
run() { taskset -c "$CORE" python -m quicktrain "$@"; }
mkdir -p "$OUT"
source "$(dirname "$0")/rq_jobs.sh"
for repeats in $(seq 1 "$REPEATS"); do
  for job in "${JOBS[@]}"; do
    IFS='|' read -r model args target <<<"$job"
    cl=$(autotuned techniques.channels_last "$TUNED/autotune-$model.yaml")
    for arm in bf16 accum; do
      dest="$OUT/$model-$arm"
      mkdir -p "$dest/runs"
      [[ $arm == accum ]] && link_baselines "$OUT/$model-bf16" "$dest"  # the baselines ran in MODEL-bf16
      sw=$(rq1_switch "$arm" "$cl")
      # shellcheck disable=SC2086
      run ablate --techniques "$arm" --switch "$sw/$BASELINE_OFF" --models "$model" --datasets "$DATASET" \
        --repeats "$repeats" --batch-size "$BATCH" $args $SUBSET --target-accuracy "$target" --no-stop-at-target \
        --eval-every-steps "$EVAL" --no-progress --out "$dest"
    done
  done
done
