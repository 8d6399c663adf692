#!/usr/bin/env bash
# The GPU checks in one command: under 9 minutes on one H200, no network.
#
#   python benchmarks/gpu_carry.py pack        # here, once: wheels + the CIFAR-10 JPEG copy in .gpu-carry/
#   bash benchmarks/gpu_suite.sh --dry-run     # here, on a CPU: the plan, and whether the carried tree fits
#   bash benchmarks/gpu_suite.sh               # on the GPU machine, with .gpu-carry carried along
#   DEVICE=cpu VS_ARGS="--max-train-samples 2000 --airbench-epochs 1 --quicktrain-epochs 1" \
#     bash benchmarks/gpu_suite.sh             # a rehearsal of every step on a CPU, tiny sizes
#
# The GPU image has PyTorch, timm, tensorboard and matplotlib but not pytorch-ignite (nor optuna,
# which the suite does not need) and no network: the carried wheels are installed without an index.
# With the device tool: run(command="bash benchmarks/gpu_suite.sh", carry=[".gpu-carry"]). Everything
# is written under WORK (default /tmp/gpu-suite); at the end suite.md, suite.json and the records
# (logs, JSON, run records without checkpoints or data) as records.tar.gz are copied to $OUT, the
# folder the tool brings back (at most 8 files), else to runs/gpu-suite. Steps, each with its own
# time limit (a step that fails or times out is recorded and the suite goes on):
#   1. CUDA-only tests: sync-free updates under set_sync_debug_mode("error"), pinned batches and
#      non_blocking copies, fp16 autocast and GradScaler, a real CUDA OOM      (<= 75 s)
#   2. pinned vs pageable DataLoader memory, host-to-device copies                  (<= 35 s)
#   3. step throughput, off/bf16/fp16 x channels-last, resnet50 and vit_small,
#      batch 256, interleaved against plain (quicktrain autotune --switches)         (<= 2 x 70 s)
#   3b. photos (issue 31): resnet50 at 224 px, bf16, channels-last, trained from quicktrain's photo
#      store (3,000 CIFAR JPEGs upscaled to 256-512 px) with 12 workers: its epochs' images/s against
#      the model's step alone on a batch already on the GPU ("data wait")          (<= 60 s)
#   4. the Muon speedrun recipe (issue 16), 3 seeds, each timed to airbench94's accuracy, beside
#      airbench94 on the same data (benchmarks/vs_airbench.py; airbench warmed up first, as its
#      own script does; quicktrain's cold start stays inside its time)          (<= 210 s)
#      RECIPE=configs/... and RECIPE_ARGS="--epochs 7 ..." choose quicktrain's recipe there. Eager:
#      compiling is counted in a run's time and a run of a few seconds cannot repay it; COMPILE=1
#      adds torch.compile anyway.
#   5. one JSON (suite.json) and a short markdown table (suite.md)
set -uo pipefail
cd "$(dirname "$0")/.."

DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1
R=${WORK:-/tmp/gpu-suite}
DEST=${OUT:-runs/gpu-suite}
DATA=${DATA:-/tmp/cifar10-jpeg}
PY=${PYTHON:-python}
RECIPE=${RECIPE:-configs/speedrun_muon_cifar10.yaml}
RECIPE_ARGS=${RECIPE_ARGS:-}
DEVICE=${DEVICE:-cuda}
VS_ARGS=${VS_ARGS:-}
COMPILE_FLAG=$([[ "${COMPILE:-0}" == 1 ]] && echo --compile)
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

STEPS=(
  "75|tests|$PY -m pytest -q -rs tests/test_sync_free.py tests/test_pinning.py tests/test_precision.py tests/test_faults.py tests/test_averaging.py tests/test_auto_augment.py -k 'cuda or oom or pinn'"
  "35|pinned|$PY benchmarks/pinned_loader.py --repeats 5 --json $R/pinned.json"
  "70|step-resnet50|$PY -m quicktrain autotune --model resnet50 --batch-size 256 --dataset synthetic --device $DEVICE --switches amp,channels_last --repeats 3 --steps 5 --warmup 3 --out $R/autotune-resnet50.yaml --json $R/step-resnet50.json"
  "70|step-vit_small|$PY -m quicktrain autotune --model vit_small --batch-size 256 --dataset synthetic --device $DEVICE --switches amp,channels_last --repeats 3 --steps 5 --warmup 3 --out $R/autotune-vit_small.yaml --json $R/step-vit_small.json"
  "60|photos-resnet50|$PY benchmarks/photo_loader.py --cifar $DATA --build $R/photos --train-per-class 300 --test-per-class 20 --sizes 224 --network resnet50 --amp bf16 --arms quicktrain --workers 12 --batch-size 256 --epochs 2 --seeds 1 --device $DEVICE --json $R/photos-resnet50.json"
  "210|speedrun-vs-airbench|$PY benchmarks/vs_airbench.py --data $DATA --seeds 3 $COMPILE_FLAG --device $DEVICE --config $RECIPE --quicktrain-args '$RECIPE_ARGS' $VS_ARGS --work $R/vs-airbench --json $R/vs-airbench.json"
)

if [[ $DRY == 1 ]]; then
  echo "gpu_suite plan (work in $R, results copied to $DEST; data unpacked to $DATA):"
  total=0
  for step in "${STEPS[@]}"; do
    IFS='|' read -r limit name cmd <<<"$step"
    total=$((total + limit))
    printf '  %-22s <= %3ss  %s\n' "$name" "$limit" "$cmd"
  done
  echo "  time limits add up to ${total}s (+ ~20 s to install the wheels and unpack the data): must stay under 540 s"
  [[ $total -le 520 ]] || { echo "dry run: the plan is too long"; exit 1; }
  [[ -f .gpu-carry/cifar10-jpeg.npz && -n "$(ls .gpu-carry/wheels/*.whl 2>/dev/null)" ]] \
    || { echo "dry run: .gpu-carry is missing; run: python benchmarks/gpu_carry.py pack"; exit 1; }
  $PY benchmarks/gpu_carry.py size || { echo "dry run: the carried tree is over the limit"; exit 1; }
  for script in benchmarks/pinned_loader.py benchmarks/vs_airbench.py benchmarks/photo_loader.py; do
    $PY "$script" --help >/dev/null || { echo "dry run: $script does not start"; exit 1; }
  done
  $PY -m quicktrain autotune --help | grep -q -- "--switches" || { echo "dry run: autotune lacks --switches"; exit 1; }
  echo "dry run: plan and carried size OK"
  exit 0
fi

mkdir -p "$R"
$PY -c "import ignite" 2>/dev/null || $PY -m pip install --no-index --no-deps -q .gpu-carry/wheels/*.whl
$PY -c "import airbench" 2>/dev/null || $PY -m pip install --no-index --no-deps -q .gpu-carry/wheels/airbench-*.whl
[[ -d $DATA/train ]] || $PY benchmarks/gpu_carry.py unpack --to "$DATA"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$R/gpu.txt" 2>&1
$PY -c "import torch, json; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda}))" > "$R/versions.json"

: > "$R/steps.tsv"
for step in "${STEPS[@]}"; do
  IFS='|' read -r limit name cmd <<<"$step"
  echo "== $name (<= ${limit}s)"
  start=$(date +%s)
  timeout "$limit" bash -c "$cmd" > "$R/$name.log" 2>&1
  status=$?
  printf '%s\t%s\t%s\n' "$name" "$status" "$(( $(date +%s) - start ))" >> "$R/steps.tsv"
  tail -n 5 "$R/$name.log"
done

$PY - "$R" <<'EOF'
"""suite.json (everything measured) and suite.md (the short table)."""
import json
import sys
from pathlib import Path

root = Path(sys.argv[1])
steps = [line.split("\t") for line in (root / "steps.tsv").read_text().splitlines() if line]
suite = {"steps": {name: {"exit": int(code), "seconds": int(sec)} for name, code, sec in steps}}
for name in ("pinned", "step-resnet50", "step-vit_small", "photos-resnet50", "vs-airbench"):
    path = root / f"{name}.json"
    suite[name] = json.loads(path.read_text()) if path.is_file() else None
versions = root / "versions.json"
suite["versions"] = json.loads(versions.read_text()) if versions.is_file() else None
gpu = root / "gpu.txt"
suite["gpu"] = gpu.read_text().strip() if gpu.is_file() else None
(root / "suite.json").write_text(json.dumps(suite, indent=2) + "\n")

lines = [f"# GPU suite: {suite['gpu']}", "", "| step | exit | seconds |", "|---|---|---|"]
lines += [f"| {n} | {v['exit']} | {v['seconds']} |" for n, v in suite["steps"].items()]
for model in ("resnet50", "vit_small"):
    table = suite.get(f"step-{model}")
    if table:
        lines += ["", f"**{model}, batch 256: images/s (median) and vs plain**", "", "| candidate | img/s | vs plain |", "|---|---|---|"]
        lines += [f"| {r['candidate']} | {r['images_per_s']:.0f} | {r['vs_plain']:.2f}x |" for r in table["rows"]]
pinned = suite.get("pinned")
if pinned and "ratio_median" in pinned:
    lines += ["", f"pinned / pageable loader throughput: {pinned['ratio_median']:.2f}x (median)"]
photos = suite.get("photos-resnet50")
if photos:
    import statistics
    got = photos["sizes"]["224"]
    rate = statistics.median(got["images_per_s"]["quicktrain"])
    lines += ["", f"photos, resnet50 224 px bf16: {rate:.0f} img/s from the photo store, model alone "
              f"{got['model_alone_images_per_s']:.0f} img/s ({rate / got['model_alone_images_per_s']:.0%})"]
air = suite.get("vs-airbench")
if air:
    lines += ["", f"airbench94 median accuracy (target): {air['target']:.4f}"]
    rows = zip(air["airbench"], air["quicktrain_to_target"], air["quicktrain_whole_run"], air["quicktrain_final"])
    for i, (a, q, w, final) in enumerate(rows):
        reach = f"{q['time_s']:.2f}s ({q['time_s'] / a['time_s']:.2f}x)" if q else "not reached"
        lines.append(f"- seed {i}: airbench94 {a['accuracy']:.4f} in {a['time_s']:.2f}s; quicktrain to target {reach}; "
                     f"whole run {final:.4f} in {w['time_s']:.2f}s ({w['time_s'] / a['time_s']:.2f}x)")
(root / "suite.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF

# What comes back: at most 8 files. The records without data, checkpoints or weights.
mkdir -p "$DEST"
cp "$R/suite.md" "$R/suite.json" "$DEST/" 2>/dev/null
tar -czf "$DEST/records.tar.gz" -C "$(dirname "$R")" \
  --exclude='*.pt' --exclude='*.npz' --exclude='photos' --exclude='checkpoint*' --exclude='events.out.*' "$(basename "$R")"
ls -la "$DEST"
