#!/usr/bin/env bash
# autotune quiet and under load, one after the other, on the same machine:
#   bash benchmarks/autotune_load.sh OUT_DIR [MODEL] [BUSY]
# First `quicktrain autotune` on a quiet machine, then again beside BUSY (default 4) busy
# processes, each a one-thread float32 matrix product in a loop (load ~BUSY on top of autotune's
# own threads): the load issue 43 saw make autotune pick fp32 for resnet18. Writes
# OUT_DIR/{quiet,load}.yaml (the config with the table as a comment), .json (the table) and .txt
# (what autotune printed), and OUT_DIR/load-avg.txt (the load average while the loaded run ran).
set -euo pipefail
out=${1:?usage: autotune_load.sh OUT_DIR [MODEL] [BUSY]}
model=${2:-resnet18}
busy=${3:-4}
mkdir -p "$out"
tune() {  # tune NAME: one autotune run into $out/NAME.*
  python -m quicktrain autotune --model "$model" --batch-size 128 \
    --out "$out/$1.yaml" --json "$out/$1.json" 2>&1 | tee "$out/$1.txt"
}

tune quiet

pids=()
stop_load() { kill "${pids[@]}" 2>/dev/null || true; }
trap stop_load EXIT
for _ in $(seq "$busy"); do
  OMP_NUM_THREADS=1 python -c "
import torch
torch.set_num_threads(1)
a = torch.randn(384, 384)
while True:
    a = torch.tanh(a @ a)
" &
  pids+=($!)
done
sleep 20  # let the load average climb
(while true; do cut -d' ' -f1-3 /proc/loadavg; sleep 10; done) > "$out/load-avg.txt" &
pids+=($!)
tune load
