"""``benchmarks/airbench_peers.py``: a published speedrun script run on a CPU unchanged but for the
device. A script shaped like airbench94_muon.py (CUDA calls, fp16 casts, ``@torch.compile``, its own
CUDA-event timer and printed table) runs here: its forward under bf16 autocast with fp32 weights,
nothing compiled, its own timer read from its table, and torch left as it was afterwards."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch
from conftest import REPO

spec = importlib.util.spec_from_file_location("airbench_peers", REPO / "benchmarks" / "airbench_peers.py")
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)

SCRIPT = """
import sys
with open(sys.argv[0]) as f:
    code = f.read()
import torch
from torch import nn

@torch.compile
def double(x):
    return 2 * x

logging_columns_list = ["run   ", "epoch", "val_acc", "tta_val_acc", "time_seconds"]

def print_training_details(variables, is_final_entry):
    cells = []
    for col in logging_columns_list:
        var = variables.get(col.strip(), None)
        cells.append(("" if var is None else var if isinstance(var, str) else "%.4f" % var if isinstance(var, float)
                      else str(var)).rjust(len(col)))
    print("".join("|  %s  " % cell for cell in cells) + "|")

class CifarNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.half()

    def forward(self, x, whiten_bias_grad=True):
        y = self.conv(x)
        self.seen = (y.dtype, self.conv.weight.dtype, x.device.type)
        return y.mean((2, 3))

def main(run, model):
    data = torch.load("cifar10/train.pt", map_location=torch.device("cuda"))
    x = (data["images"].half() / 255).permute(0, 3, 1, 2).cuda()
    staging = torch.zeros(x.shape, dtype=torch.half, device="cpu").pin_memory()  # as Hiverge's loader
    order = torch.empty(len(x), dtype=torch.long, device="cuda")
    assert staging.shape == x.shape and order.device.type == "cpu"
    starter, ender = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    starter.record()
    out = double(model(x))
    ender.record()
    torch.cuda.synchronize()
    time_seconds = 1e-3 * starter.elapsed_time(ender)
    for epoch in range(2):
        val_acc = 0.5 + epoch / 10
        time_seconds += 1.0
        print_training_details(locals(), is_final_entry=False)
        run = None
    epoch, tta_val_acc = "eval", 0.625
    time_seconds += 0.25
    print_training_details(locals(), is_final_entry=True)
    return tta_val_acc + float(out.detach().sum()) * 0
"""


def _work(tmp_path):
    (tmp_path / "work" / "cifar10").mkdir(parents=True)
    images = torch.randint(0, 256, (4, 8, 8, 3), dtype=torch.uint8)
    torch.save(
        {"images": images, "labels": torch.zeros(4, dtype=torch.long)}, tmp_path / "work" / "cifar10" / "train.pt"
    )
    return tmp_path / "work"


def test_a_muon_shaped_script_runs_on_the_cpu_with_its_own_timer(tmp_path):
    script = tmp_path / "airbench94_muon.py"
    script.write_text(SCRIPT)
    originals = (torch.Tensor.cuda, torch.Tensor.pin_memory, torch.empty, torch.nn.Module.half, torch.load,
                 torch.compile, torch.cuda.Event, sys.argv)  # fmt: skip
    peer = peers.Airbench94Muon(script)
    result = peer.run(_work(tmp_path), seed=0, cpu=True, epochs=None)
    assert result["accuracy"] == 0.625
    assert [row["val_acc"] for row in result["epochs"]] == [0.5, 0.6]
    assert result["tta_eval_s"] == pytest.approx(0.25, abs=1e-3)  # its own timer, read from its table
    assert result["time_s"] == pytest.approx(result["train_s"] + 0.25, abs=1e-3) and result["train_s"] >= 2.0
    assert peer.module.code == SCRIPT  # it read itself, as when run as a script
    assert type(peer.module.double).__name__ == "function"  # @torch.compile left it eager
    assert peer.model.seen == (torch.bfloat16, torch.float32, "cpu")  # bf16 autocast, fp32 weights
    after = (torch.Tensor.cuda, torch.Tensor.pin_memory, torch.empty, torch.nn.Module.half, torch.load,
             torch.compile, torch.cuda.Event, sys.argv)  # fmt: skip
    assert after == originals
    assert peer.settings() == {"peer": "airbench94_muon", "peer_sha256": peer.sha256[:16], "peer_commit": "unknown"}


def test_the_muon_peer_needs_its_script_and_says_where_it_comes_from(tmp_path):
    with pytest.raises(SystemExit, match=r"needs --peer-script FILE.*git clone .*cifar10-airbench.*f1c599c"):
        peers.make_peer("airbench94_muon", None)
    with pytest.raises(SystemExit, match="needs --peer-script"):
        peers.make_peer("airbench94_muon", tmp_path / "missing.py")


def test_a_hiverge_shaped_script_gives_its_returned_accuracy_and_time(tmp_path):
    """cifar10_speedrun.py returns (accuracy without TTA, with TTA, seconds) from one timer."""
    script = tmp_path / "cifar10_speedrun.py"
    script.write_text(SCRIPT.replace("return tta_val_acc + ", "return 0.5, tta_val_acc, time_seconds + "))
    result = peers.make_peer("hiverge", script).run(_work(tmp_path), seed=1, cpu=True, epochs=None)
    assert result["accuracy"] == 0.625 and result["accuracy_without_tta"] == 0.5
    assert result["time_s"] == result["train_s"] and result["time_s"] >= 2.25
