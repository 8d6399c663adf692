"""Data parallelism through torchrun: two Gloo processes on CPU match one process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from quicktrain.data.loader import EpochBatches, EvalShards
from quicktrain.techniques.distributed import Distributed

RUN = [
    "--dataset", "synthetic", "--max-train-samples", "80", "--max-test-samples", "42", "--model", "test_vit",
    "--epochs", "1", "--batch-size", "16", "--amp", "off", "--no-tensorboard", "--no-progress", "--seed", "3",
]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ranks_split_every_global_batch_equally() -> None:
    single = EpochBatches(70, 16, seed=1, shuffle=True)
    ranks = [EpochBatches(70, 16, seed=1, shuffle=True, rank=r, world=2) for r in range(2)]
    whole = list(single)
    parts = [list(r) for r in ranks]
    assert len(parts[0]) == len(parts[1]) == len(whole) == len(ranks[0]) == 5
    for batch, a, b in zip(whole, *parts):
        assert len(a) == len(b) and set(a) | set(b) == set(batch[: 2 * len(a)])  # last: 6 of 6, even
    assert not set(parts[0][0]) & set(parts[1][0])


def test_eval_shards_cover_the_split_once() -> None:
    shards = [sorted(i for b in EvalShards(41, 8, rank=r, world=3) for i in b) for r in range(3)]
    assert sorted(i for shard in shards for i in shard) == list(range(41))


@pytest.fixture
def gloo_group(monkeypatch: pytest.MonkeyPatch):
    """A one-process Gloo group in this process: DDP's reducer and hooks run as on many."""
    import torch.distributed as dist

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("hook", ["none", "fp16", "bf16"])
def test_training_wraps_ddp_without_a_python_hook_and_all_reduces_once_per_update(gloo_group, hook) -> None:
    """Counted by a hook the test registers itself, which DDP allows only when quicktrain registered none;
    with a compression hook asked for, DDP refuses a second one."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    dist_ = Distributed(rank=0, world=2, backend="gloo", comm_hook=hook)  # "active": wraps and uses no_sync
    ddp = dist_.wrap(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)), torch.device("cpu"))
    if hook != "none":
        with pytest.raises(RuntimeError, match="can only be called once"):
            ddp.register_comm_hook(None, allreduce_hook)
        return
    buckets = []

    def counted(state, bucket):
        buckets.append(bucket.index())
        return allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, counted)
    for _update in range(3):
        for micro in range(4):  # four micro-batches: only the last backward all-reduces
            with dist_.sync(ddp, last=micro == 3):
                ddp(torch.randn(5, 4)).sum().backward()
    assert dist_.allreduces == 3
    assert len(buckets) == 3 * len(set(buckets))  # every bucket once per update, never per micro-batch
    assert dist.is_initialized()


@pytest.mark.slow
def test_two_gloo_processes_match_one_process(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    single = subprocess.run(
        [sys.executable, "-m", "quicktrain", "train", *RUN, "--out", str(one)], capture_output=True, text=True
    )
    assert single.returncode == 0, single.stderr
    port = str(_free_port())
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port,
              "-m", "quicktrain", "train", *RUN, "--accum-steps", "2", "--out", str(two)]  # fmt: skip
    ddp = subprocess.run(launch, capture_output=True, text=True)
    assert ddp.returncode == 0, ddp.stdout[-2000:] + ddp.stderr[-2000:]
    assert "2 processes x 8 = 4 micro-batch x 2 accumulation steps per process" in ddp.stdout
    a = torch.load(one / "model.pt", weights_only=True)
    b = torch.load(two / "model.pt", weights_only=True)
    assert a.keys() == b.keys()  # no "module." prefix from the DDP wrapper
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-5, atol=1e-6)
    s1 = json.loads((one / "summary.json").read_text())
    s2 = json.loads((two / "summary.json").read_text())
    assert s2["world_size"] == 2 and s2["optimizer_updates"] == s1["optimizer_updates"] == 5
    assert s2["micro_steps"] == 2 * s2["optimizer_updates"]  # two micro-batches per update on each rank ...
    assert s2["grad_allreduces"] == s2["optimizer_updates"]  # ... but one gradient all-reduce per update
    # evaluation counted all 42 test images across both ranks
    assert s2["test_samples"] == 42 and s2["test_loss"] == pytest.approx(s1["test_loss"], rel=1e-5)
    assert not list(two.glob("*rank*"))  # only rank 0 wrote the record
    assert s2["ddp_comm_hook"] == "none"

    compressed = tmp_path / "bf16"
    launch = [*launch[: launch.index("--out")], "--ddp-comm-hook", "bf16", "--out", str(compressed)]
    launch[launch.index(port)] = str(_free_port())
    bf16 = subprocess.run(launch, capture_output=True, text=True)
    assert bf16.returncode == 0, bf16.stdout[-2000:] + bf16.stderr[-2000:]
    c = torch.load(compressed / "model.pt", weights_only=True)
    assert json.loads((compressed / "summary.json").read_text())["ddp_comm_hook"] == "bf16"
    drift = max(float((c[k].float() - a[k].float()).abs().max()) for k in a)
    assert 0 < drift < 1e-2  # gradients rounded to bf16 on the wire: close to fp32's, not identical


def test_a_numbered_gpu_under_torchrun_is_refused(monkeypatch) -> None:
    """cuda:N would put every rank on GPU N (NCCL: "Duplicate GPU"); each rank takes its LOCAL_RANK's."""
    from quicktrain.engine.setup import resolve_device
    from quicktrain.errors import ConfigError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ConfigError, match=r"run.device=cuda:1 under torchrun .* use --device cuda"):
        resolve_device("cuda:1", local_rank=0)
    assert resolve_device("cuda", local_rank=3) == torch.device("cuda", 3)


def test_sync_bn_keeps_every_layer_its_keys_and_activation() -> None:
    import timm

    from quicktrain.techniques.sync_bn import CrossRank, convert

    model = timm.create_model("test_efficientnet", num_classes=3).eval()
    x = torch.randn(2, 3, 32, 32)
    before, keys = model(x), list(model.state_dict())
    convert(model)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert norms and all(isinstance(m, CrossRank) for m in norms)
    assert type(norms[0]).__name__ == "CrossRankBatchNormAct2d"  # timm's norm + activation layer, kept whole
    assert list(model.state_dict()) == keys
    torch.testing.assert_close(model(x), before)  # one process: plain BatchNorm


@pytest.mark.slow
def test_sync_bn_on_two_gloo_processes_matches_one_process_with_the_whole_batch(tmp_path: Path) -> None:
    """BatchNorm (test_resnet) over 2 x 8 images with --sync-bn normalises like one process over 16;
    without it each rank's statistics cover its 8 only, and the weights drift apart."""
    args = [*RUN]
    args[args.index("test_vit")] = "test_resnet"
    one = tmp_path / "one"
    single = subprocess.run(
        [sys.executable, "-m", "quicktrain", "train", *args, "--out", str(one)], capture_output=True, text=True
    )
    assert single.returncode == 0, single.stderr
    a = torch.load(one / "model.pt", weights_only=True)
    drifts = {}
    for sync in ("--sync-bn", "--no-sync-bn"):
        out = tmp_path / sync
        launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                  str(_free_port()), "-m", "quicktrain", "train", *args, sync, "--out", str(out)]  # fmt: skip
        ddp = subprocess.run(launch, capture_output=True, text=True)
        assert ddp.returncode == 0, ddp.stdout[-2000:] + ddp.stderr[-2000:]
        b = torch.load(out / "model.pt", weights_only=True)
        drifts[sync] = max(float((b[k].float() - a[k].float()).abs().max()) for k in a)
        assert json.loads((out / "summary.json").read_text())["sync_bn"] is (sync == "--sync-bn")
    assert drifts["--sync-bn"] < 1e-4 < drifts["--no-sync-bn"]
