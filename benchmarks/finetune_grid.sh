#!/usr/bin/env bash
# Issue 32's measurement: transfer from a CIFAR-10 checkpoint to MNIST digits, then an ablation of
# fine-tuning recipes on that transfer job, all with `quicktrain ablate` and reported by its rules.
#
#   bash benchmarks/finetune_grid.sh OUT [REPEATS]
#
# 1. source: resnet18 trained once (seed 0) on a fixed class-balanced 10,000-image subset of the
#    CIFAR-10 JPEG copy, 5 epochs, bf16 + channels-last (OUT/source; reused when it exists).
# 2. transfer: the same fine-tuning job on mnist5k (2,000 training digits, its whole 1,000-digit
#    test split, 5 epochs, batch 32, SGD lr 0.05, bf16 + channels-last) from scratch (baseline)
#    and from OUT/source (arm `pre`: a new 10-class head, since digits are not CIFAR's classes),
#    REPEATS seeds, time to TARGET_TRANSFER.
# 3. recipes on the job from OUT/source: EMA of the weights (`ema`, decay 0.999 with timm's
#    warm-up), MixUp 0.8 + CutMix 1.0 (`mix`), RandAugment rand-m9-mstd0.5 (`auto_augment`), each
#    a 2-arm ablation against the same baseline (run once per seed in OUT/recipes-ema, linked into
#    the others), 10 epochs (regularisers need more than the 5 of step 2: in a 5-epoch pilot with all
#    three the model was at 0.58 after 4 epochs, the plain fine-tuning at 0.86), time to TARGET_RECIPES.
# Seeds interleaved (every ablation's seed 0, then seed 1, ...); re-running continues. One core,
# one thread (taskset -c ${CORE:-1}).
set -euo pipefail
OUT=${1:?usage: finetune_grid.sh OUT [REPEATS]}
REPEATS=${2:-3}
CORE=${CORE:-1}
export OMP_NUM_THREADS=1
run() { taskset -c "$CORE" python -m quicktrain "$@"; }
mkdir -p "$OUT"
SOURCE="$OUT/source"
if [[ ! -f "$SOURCE/model.pt" ]]; then
  run train --model resnet18 --dataset imagefolder:../shared/datasets/cifar10-jpeg --max-train-samples 10000 \
    --max-test-samples 1000 --epochs 5 --amp bf16 --channels-last --optimizer sgd --lr 0.2 --batch-size 128 \
    --no-progress --out "$SOURCE"
fi
JOB=(--models resnet18 --datasets mnist5k --max-train-samples 2000 --batch-size 32 --optimizer sgd
     --lr 0.05 --amp bf16 --channels-last --no-stop-at-target --eval-every-steps 16 --no-progress)
for repeats in $(seq 1 "$REPEATS"); do
  run ablate --techniques pre --switch "pre=model.pretrained=$SOURCE" "${JOB[@]}" --epochs 5 --repeats "$repeats" \
    --target-accuracy "${TARGET_TRANSFER:-0.5}" --out "$OUT/transfer"
  for recipe in ema mix auto_augment; do
    dest="$OUT/recipes-$recipe"
    if [[ $recipe != ema ]]; then  # the baseline (plain fine-tuning from the source) ran in recipes-ema
      mkdir -p "$dest/runs"
      for base in "$OUT/recipes-ema"/runs/*__baseline__r*; do
        [[ -e "$dest/runs/$(basename "$base")" ]] || cp -al "$base" "$dest/runs/"
      done
    fi
    extra=()
    [[ $recipe == mix ]] && extra=(--switch "mix=data.mixup=0.8,data.cutmix=1.0")
    run ablate --techniques "$recipe" "${extra[@]}" --pretrained "$SOURCE" "${JOB[@]}" --epochs "${RECIPE_EPOCHS:-10}" \
      --repeats "$repeats" \
      --target-accuracy "${TARGET_RECIPES:-0.8}" --out "$dest"
  done
done
