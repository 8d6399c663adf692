"""Does building airbench94's training loader before its timer (22f1c1a) change its training speed?
airbench94 for a few epochs on the CPU, its loader built outside train94 (as vs_airbench does since
22f1c1a) and inside (as before), interleaved; training seconds each. Run from the repository root:
    python airbench_loader_check.py WORK EPOCHS REPEATS
WORK holds cifar10/{train,test}.pt (a vs_airbench work folder)."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path.cwd() / "benchmarks"))
import airbench
import torch
from airbench.lib_airbench94 import CifarLoader, hyp, make_net94
from vs_airbench import airbench_on_cpu, bf16_net

work, epochs, repeats = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
os.chdir(work)
times = {"outside": [], "inside": []}
with airbench_on_cpu():
    for trial in range(repeats):
        for side in ("outside", "inside") if trial % 2 == 0 else ("inside", "outside"):
            torch.manual_seed(trial)
            make_net = bf16_net(make_net94)
            opt = hyp["opt"]
            if side == "outside":
                loader = CifarLoader("cifar10", train=True, batch_size=opt["batch_size"], aug=hyp["aug"], altflip=True)
                start = time.perf_counter()
                airbench.train94(loader, make_net=make_net, verbose=False, epochs=epochs)
            else:
                start = time.perf_counter()
                airbench.train94(make_net=make_net, verbose=False, epochs=epochs)
            times[side].append(time.perf_counter() - start)
            print(side, round(times[side][-1], 1), flush=True)
print({k: [round(t, 1) for t in v] for k, v in times.items()})
