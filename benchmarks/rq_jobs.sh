# The RQ grids' jobs, shared by rq_grid.sh and rq1_grid.sh (sourced; DATASET set by the caller):
# SUBSET, BATCH, EVAL and JOBS ("model|shared job flags|target test accuracy"), and BASELINE_OFF, the
# overrides of the baseline arm (fp32, no accumulation, no channels-last, the torch loader).
# model | shared job (optimizer, epochs) | target test accuracy (each baseline reached it in its pilot)
if [[ "$DATASET" == mnist5k || "$DATASET" == digits ]]; then
  # their fixed test splits, whole; 2,000 training digits; batch 32: at batch 128 resnet18 had 80 updates in
  # 5 epochs and reached 0.45 (benchmarks/results/rq-grid-mnist5k/README.md has the pilot)
  SUBSET="--max-train-samples 2000"
  BATCH=32 EVAL=32
  JOBS=(
    "resnet18|--optimizer sgd --lr 0.05 --epochs 5|${TARGET_RESNET18:-0.50}"
    "vit_tiny|--optimizer adamw --lr 0.001 --weight-decay 0.05 --epochs 5|${TARGET_VIT_TINY:-0.25}"
    "efficientnet_b0|--optimizer adamw --lr 0.001 --weight-decay 0.05 --epochs 10|${TARGET_EFFICIENTNET_B0:-0.25}"
  )
else
  SUBSET="--max-train-samples 2000 --max-test-samples 1000"
  BATCH=128 EVAL=8
  JOBS=(
    "resnet18|--optimizer sgd --lr 0.2 --epochs 10|${TARGET_RESNET18:-0.34}"
    "vit_tiny|--optimizer adamw --lr 0.001 --weight-decay 0.05 --epochs 10|${TARGET_VIT_TINY:-0.29}"
    "efficientnet_b0|--optimizer adamw --lr 0.001 --weight-decay 0.05 --epochs 20|${TARGET_EFFICIENTNET_B0:-0.18}"
  )
fi
BASELINE_OFF="techniques.amp=off,techniques.accum_steps=1,techniques.channels_last=false,data.loader=torch"

# What the scripts that source this share besides the jobs:
autotuned() {  # SECTION.KEY AUTOTUNE_YAML: the value autotune chose (True/False come out lower-case)
  python -c "import yaml,sys; s,k=sys.argv[1].split('.'); print(str(yaml.safe_load(open(sys.argv[2]))[s][k]).lower())" "$1" "$2"
}
link_baselines() {  # FROM DEST: hard-link FROM's baseline runs into DEST/runs, once
  mkdir -p "$2/runs"
  for base in "$1"/runs/*__baseline__r*; do
    [[ -e "$2/runs/$(basename "$base")" ]] || cp -al "$base" "$2/runs/"
  done
}
rq1_switch() {  # ARM LAYOUT: RQ1's one-technique arm (bf16 with the tuned layout, or accum), as --switch's on-side
  case $1 in
    bf16) echo "bf16=techniques.amp=bf16,techniques.accum_steps=1,techniques.channels_last=$2,data.loader=torch" ;;
    accum) echo "accum=techniques.amp=off,techniques.accum_steps=2,techniques.channels_last=false,data.loader=torch" ;;
  esac
}
