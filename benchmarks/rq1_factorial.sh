#!/usr/bin/env bash
# Issue 33, RQ1 in one run per model: bf16 and 2-step accumulation, each alone and both together,
# against the fp32 baseline: a 2x2 factorial, all four arms on one machine, seeds interleaved.
#
#   bash benchmarks/rq1_factorial.sh TUNED OUT [DATASET] [REPEATS]    # DATASET: mnist5k or the CIFAR-10 JPEG copy
#
# TUNED holds the grid's autotune-MODEL.yaml per model (benchmarks/rq_grid.sh): the layout it chose
# with bf16 (channels-last or not) goes with the bf16 arm, as in the grid's `opt` arm. Jobs, subset,
# targets and the baseline's overrides are rq_grid.sh's (benchmarks/rq_jobs.sh). Arms:
#   baseline    fp32, no accumulation, contiguous layout, the torch loader (the grid's baseline)
#   bf16        bf16 autocast + the tuned layout
#   accum       2 accumulation steps (half-size micro-batches, same update), fp32
#   bf16+accum  both (the grid's `opt` arm)
# Unlike benchmarks/rq1_grid.sh, which adds the single-technique arms to a finished grid's
# baselines, this runs every arm itself: for a machine other than the grid's. Re-running continues.
set -euo pipefail
TUNED=${1:?usage: rq1_factorial.sh TUNED OUT [DATASET] [REPEATS]}
OUT=${2:?usage: rq1_factorial.sh TUNED OUT [DATASET] [REPEATS]}
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
    cl=$(python -c "import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))['techniques']['channels_last'])" \
      "$TUNED/autotune-$model.yaml")
    # shellcheck disable=SC2086
    run ablate --techniques bf16,accum --models "$model" --datasets "$DATASET" --repeats "$repeats" \
      --switch "bf16=techniques.amp=bf16,techniques.channels_last=${cl,,}/techniques.amp=off,techniques.channels_last=false" \
      --switch "accum=techniques.accum_steps=2/techniques.accum_steps=1" --loader torch \
      --batch-size "$BATCH" $args $SUBSET --target-accuracy "$target" --no-stop-at-target \
      --eval-every-steps "$EVAL" --no-progress --out "$OUT/$model"
  done
done
