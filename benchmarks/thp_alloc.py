"""Transparent huge pages for PyTorch's CPU allocations (THP_MEM_ALLOC_ENABLE=1, which
quicktrain sets on Linux) against the default, on real training steps.

PyTorch reads the switch once, when it first allocates, so each side runs in its own
process: the sides alternate (off, on, off, on, ...), every process builds the model, runs
--warmup untimed steps, then times --steps steps. Reported: images/s per side and the
ratio on/off per pair, median [min-max], plus the process's user and system CPU time (page
faults show up as system time).

    python benchmarks/thp_alloc.py --model speedrun_net --batch-size 512 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import spread

CHILD = """
import json, os, sys, time
import torch
from quicktrain.models import create_model
model_name, batch, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
model = create_model(model_name, 10).to(memory_format=torch.channels_last)
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01, momentum=0.9, nesterov=True)
x = torch.randn(batch, 3, 32, 32).contiguous(memory_format=torch.channels_last)
y = torch.randint(0, 10, (batch,))
def step():
    with torch.autocast("cpu", torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
for _ in range(warmup):
    step()
t0, start = os.times(), time.perf_counter()
for _ in range(steps):
    step()
elapsed, t1 = time.perf_counter() - start, os.times()
result = {"images_per_s": batch * steps / elapsed, "user_s": t1.user - t0.user, "sys_s": t1.system - t0.system}
print(json.dumps(result))
"""


def measure(thp: str, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "THP_MEM_ALLOC_ENABLE": thp}
    cmd = [sys.executable, "-c", CHILD, args.model, str(args.batch_size), str(args.steps), str(args.warmup)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="speedrun_net")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"0": [], "1": []}
    for _ in range(args.repeats):
        for thp in ("0", "1"):
            runs[thp].append(measure(thp, args))
    ratio = [on["images_per_s"] / off["images_per_s"] for off, on in zip(runs["0"], runs["1"])]
    print(f"{args.model}, batch {args.batch_size}, bf16, channels-last, {args.steps} timed steps x {args.repeats}")
    for thp, name in (("0", "default allocations"), ("1", "THP_MEM_ALLOC_ENABLE=1")):
        r = runs[thp]
        print(
            f"{name:<24} {spread([x['images_per_s'] for x in r])} img/s, "
            f"user {spread([x['user_s'] for x in r])} s, system {spread([x['sys_s'] for x in r])} s"
        )
    print(f"ratio THP / default: {spread(ratio)}")
    if args.json:
        args.json.write_text(
            json.dumps({"runs": runs, "ratio": ratio, "ratio_median": statistics.median(ratio)}, indent=2)
        )


if __name__ == "__main__":
    main()
