#!/usr/bin/env bash
# Issue 33: the study's RQ2/RQ4 grid on this CPU, with `quicktrain ablate` as any user runs it.
#
#   bash benchmarks/rq_grid.sh OUT [DATASET] [REPEATS]
#
# Three families (resnet18, vit_tiny, efficientnet_b0) at 32 px on a fixed class-balanced subset,
# two arms each: baseline (fp32, no accumulation) and opt (bf16 + 2 accumulation steps, the study's
# setting, plus the channels-last / loader choice `quicktrain autotune` makes for the model here).
# Seeds 0..REPEATS-1, interleaved: every model's both arms for seed 0, then seed 1, ... (ablate skips
# completed runs, so the same command continues after an interruption). Time to target at the pilot's
# targets (benchmarks/results/rq-grid-pilot), --no-stop-at-target so final accuracies compare.
# One core, one thread (taskset -c ${CORE:-1}): the other core stays free for other work.
set -euo pipefail
OUT=${1:?usage: rq_grid.sh OUT [DATASET] [REPEATS]}
DATASET=${2:-imagefolder:../shared/datasets/cifar10-jpeg}
REPEATS=${3:-3}
CORE=${CORE:-1}
export OMP_NUM_THREADS=1
run() { taskset -c "$CORE" python -m quicktrain "$@"; }
mkdir -p "$OUT"
# the jobs, targets and baseline arm shared with rq1_grid.sh
source "$(dirname "$0")/rq_jobs.sh"

# autotune's pick of the layout and loader for each model (bf16 fixed: the study's precision)
for job in "${JOBS[@]}"; do
  IFS='|' read -r model _ _ <<<"$job"
  tuned="$OUT/autotune-$model.yaml"
  [[ -f "$tuned" ]] || run autotune --model "$model" --amp bf16 --switches channels_last,loader \
    --batch-size 64 --repeats 3 --steps 3 --warmup 2 --out "$tuned" --json "$OUT/autotune-$model.json"
done

for repeats in $(seq 1 "$REPEATS"); do
  for job in "${JOBS[@]}"; do
    IFS='|' read -r model args target <<<"$job"
    tuned="$OUT/autotune-$model.yaml"
    cl=$(autotuned techniques.channels_last "$tuned")
    loader=$(autotuned data.loader "$tuned")
    on="techniques.amp=bf16,techniques.accum_steps=2,techniques.channels_last=$cl,data.loader=$loader"
    off=$BASELINE_OFF
    # shellcheck disable=SC2086
    run ablate --techniques opt --switch "opt=$on/$off" --models "$model" --datasets "$DATASET" \
      --repeats "$repeats" --batch-size "$BATCH" $args $SUBSET --target-accuracy "$target" --no-stop-at-target \
      --eval-every-steps "$EVAL" --no-progress --out "$OUT/$model"
  done
done
