"""Surviving faults: exact resume after kill -9, SIGTERM, corrupt checkpoints, OOM, NaN."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import make_state, micro_batch, set_micro_batch, tiny_config
from torch import nn

from quicktrain.engine import oom as oom_module
from quicktrain.engine.checkpoint import find_resume, list_checkpoints
from quicktrain.engine.trainer import train
from quicktrain.errors import ConfigError, TrainingError

RUN = [
    "--dataset", "synthetic", "--max-train-samples", "640", "--max-test-samples", "40", "--model", "test_vit",
    "--epochs", "2", "--batch-size", "16", "--amp", "off", "--no-tensorboard", "--no-progress",
    "--checkpoint-every-steps", "5", "--keep-checkpoints", "3",
]  # fmt: skip


def _start(out: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "quicktrain", "train", *RUN, "--out", str(out)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_checkpoint(out: Path, proc: subprocess.Popen, min_updates: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        done = [p for p in list_checkpoints(out / "checkpoints") if p.with_name(p.name + ".sha256").is_file()]
        if done and int(done[-1].stem.rsplit("update", 1)[1]) >= min_updates:
            return
        time.sleep(0.02)
    raise AssertionError("no checkpoint appeared before the run ended")


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "model.pt", weights_only=True)


@pytest.mark.slow
def test_kill_9_mid_epoch_then_resume_ends_with_the_same_weights(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    assert subprocess.run([sys.executable, "-m", "quicktrain", "train", *RUN, "--out", str(whole)],
                          capture_output=True, check=False).returncode == 0  # fmt: skip
    killed = tmp_path / "killed"
    proc = _start(killed)
    _wait_for_checkpoint(killed, proc, min_updates=10)  # mid-epoch 1 of 40 updates per epoch
    proc.kill()  # SIGKILL: no handler runs
    proc.wait()
    assert not (killed / "model.pt").exists()
    resumed = subprocess.run(
        [sys.executable, "-m", "quicktrain", "train", "--out", str(killed), "--resume", "auto", "--no-progress"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming at epoch" in resumed.stdout
    a, b = _weights(whole), _weights(killed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["optimizer_updates"] == 80


@pytest.mark.slow
def test_sigterm_checkpoints_and_exits_0_with_the_resume_hint(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(out)
    _wait_for_checkpoint(out, proc, min_updates=5)
    proc.send_signal(signal.SIGTERM)
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, text
    assert f"quicktrain train --out {out} --resume auto" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["error"].startswith("SIGTERM")
    _, ckpt = find_resume("auto", out)
    assert ckpt["counters"]["num_updates"] == summary["optimizer_updates"] >= 5  # the summary is the checkpoint


def test_a_truncated_newest_checkpoint_falls_back_to_the_previous(tmp_path: Path, quicktrain_log) -> None:
    train(tiny_config(tmp_path, **{"run.epochs": 2, "run.keep_checkpoints": 3}))
    first, second = list_checkpoints(tmp_path / "checkpoints")
    second.write_bytes(second.read_bytes()[:1000])  # a crash mid-write on a filesystem without atomic rename
    quicktrain_log.clear()
    path, ckpt = find_resume("auto", tmp_path)
    assert path == first and ckpt["position"] == {"epoch": 1, "batch": 0}
    assert "corrupt" in quicktrain_log.text and second.name in quicktrain_log.text
    with pytest.raises(ConfigError, match="corrupt"):
        find_resume(str(second), tmp_path)


def test_simulated_oom_halves_the_micro_batch_and_keeps_the_updates(tmp_path: Path, monkeypatch) -> None:
    real = oom_module.train_step
    calls = []

    def step(state, batch):
        calls.append(micro_batch(state))
        if micro_batch(state) > 8:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(state, batch)

    monkeypatch.setattr(oom_module, "train_step", step)
    result = train(tiny_config(tmp_path, **{"run.batch_size": 32}))  # 96 samples: 3 updates
    s = result.summary
    assert s["status"] == "completed" and s["optimizer_updates"] == 3
    assert s["oom_halvings"] == 2 and s["micro_batch_size_final"] == 8 and calls[:3] == [32, 16, 8]
    assert s["micro_steps"] == 3 * 4  # 32 = 4 x 8 from then on


def test_oom_at_micro_batch_1_gives_up_clearly(tmp_path: Path, monkeypatch) -> None:
    def step(state, batch):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(oom_module, "train_step", step)
    with pytest.raises(TrainingError, match="out of memory even at micro-batch 1"):
        train(tiny_config(tmp_path, **{"run.batch_size": 4}))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a real out-of-memory error needs a CUDA device")
def test_a_real_cuda_oom_halves_the_micro_batch_and_the_run_finishes(tmp_path: Path) -> None:
    """The allocator's own error, not a simulated one: the device capped below what one full
    batch needs (measured first, uncapped), the run must halve and finish with the same updates."""
    overrides = {"run.device": "cuda", "model.name": "resnet18", "run.batch_size": 96, "run.eval_batch_size": 8,
                 "data.max_train_samples": 192}  # fmt: skip
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    free = train(tiny_config(tmp_path / "free", **overrides)).summary
    peak = torch.cuda.max_memory_allocated() - base
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + peak // 2) / total)
    try:
        capped = train(tiny_config(tmp_path / "capped", **overrides)).summary
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()
    assert free["oom_halvings"] == 0 and free["micro_batch_size_final"] == 96
    assert capped["status"] == "completed" and capped["oom_halvings"] >= 1, (peak, capped)
    assert capped["micro_batch_size_final"] == 96 >> capped["oom_halvings"]
    assert capped["optimizer_updates"] == free["optimizer_updates"] == 2


def test_nan_stops_by_default_naming_the_update_and_writes_no_bad_checkpoint(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, **{"optim.lr": 1e6, "optim.schedule": "constant", "optim.optimizer": "sgd"})
    with pytest.raises(TrainingError, match=r"non-finite \(NaN/Inf\) loss at optimizer update \d+"):
        train(cfg)
    assert list_checkpoints(tmp_path / "checkpoints") == []
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "failed"


def test_nan_skip_drops_those_updates_and_goes_on(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path, **{"optim.lr": 1e6, "optim.schedule": "constant", "run.on_nonfinite": "skip", "run.epochs": 2}
    )
    s = train(cfg).summary
    assert s["status"] == "completed" and 0 < s["skipped_updates"] < s["optimizer_updates"]
    weights = torch.load(tmp_path / "model.pt", weights_only=True)
    assert all(torch.isfinite(w).all() for w in weights.values() if w.is_floating_point())


def test_resume_may_change_how_often_to_checkpoint_and_the_loader(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, **{"run.epochs": 2, "run.keep_checkpoints": 3})
    train(cfg)
    newest = list_checkpoints(tmp_path / "checkpoints")[-1]
    for path in (newest, newest.with_name(newest.name + ".sha256"), tmp_path / "summary.json"):
        path.unlink()
    changed = {
        "run.resume": "auto",
        "run.checkpoint_every_steps": 1,
        "run.keep_checkpoints": 5,
        "data.loader": "device",
    }
    result = train(tiny_config(tmp_path, **{"run.epochs": 2, **changed}))
    assert result.summary["status"] == "completed" and result.summary["epochs_completed"] == 2


def test_a_full_disk_while_checkpointing_fails_clearly_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """ENOSPC on the second epoch's checkpoint: exit 1 in one line, record says why, epoch 1's
    checkpoint still loads (no temporary file left), and the run resumes from it."""
    import errno

    from quicktrain.cli import main
    from quicktrain.engine import checkpoint as checkpoint_module

    real = checkpoint_module.atomic_write
    calls = {"pt": 0}

    def fills_the_disk(path, write):
        if path.suffix == ".pt":
            calls["pt"] += 1
            if calls["pt"] == 2:

                def no_space(f):
                    f.write(b"partial")
                    raise OSError(errno.ENOSPC, "No space left on device")

                return real(path, no_space)
        return real(path, write)

    monkeypatch.setattr(checkpoint_module, "atomic_write", fills_the_disk)
    out = tmp_path / "run"
    argv = ["train", "--dataset", "synthetic", "--max-train-samples", "64", "--max-test-samples", "16"]
    argv += ["--model", "test_vit", "--batch-size", "32", "--epochs", "2", "--amp", "off", "--no-progress"]
    argv += ["--no-tensorboard", "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no space left on the device writing" in err and "--resume auto" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and "no space left" in summary["error"]
    assert not list((out / "checkpoints").glob(".*.tmp"))  # the half-written file is gone
    _, ckpt = find_resume("auto", out)
    assert ckpt["position"] == {"epoch": 1, "batch": 0}
    monkeypatch.setattr(checkpoint_module, "atomic_write", real)
    assert main(["train", "--out", str(out), "--resume", "--no-progress"]) == 0
    assert json.loads((out / "summary.json").read_text())["epochs_completed"] == 2


def test_run_record_files_get_the_users_umask_not_0600(tmp_path: Path) -> None:
    """Colleagues on a shared cluster folder can read each other's runs."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        folder = train(tiny_config(tmp_path / "run", **{"run.tensorboard": False})).folder
    finally:
        os.umask(old)
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert {"config.yaml", "summary.json", "model.pt", "metrics.jsonl", "env.json"} <= {p.name for p in files}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def _scaler(state):
    return state.techniques.precision.scaler


def _oom_states():
    """Two identical BatchNorm-free states with an fp16-like (enabled) scaler and clipping."""
    import copy

    from conftest import make_state

    from quicktrain.models import create_model

    torch.manual_seed(0)
    model = create_model("test_vit", num_classes=10)
    states = []
    for _ in range(2):
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
        states.append(make_state(copy.deepcopy(model), micro_batch_size=8, grad_clip=1.0, scaler=scaler))
    return states


def _assert_same_update(recovered, reference) -> None:
    assert micro_batch(recovered) == micro_batch(reference) == 4
    assert recovered.counters.micro_steps == reference.counters.micro_steps == 4  # counted once
    assert recovered.counters.num_updates == reference.counters.num_updates == 1
    assert recovered.counters.oom_halvings == 1 and _scaler(recovered).get_scale() == _scaler(reference).get_scale()
    for a, b in zip(recovered.model.parameters(), reference.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_oom_in_the_second_micro_batch_redoes_the_update_exactly() -> None:
    from conftest import uint8_batch

    from quicktrain.engine.oom import step_with_oom_retry
    from quicktrain.engine.step import train_step

    recovered, reference = _oom_states()
    forwards = {"n": 0}

    def second_forward_fails(module, args):
        forwards["n"] += 1
        if forwards["n"] == 2:  # the second micro-batch of the first attempt
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    handle = recovered.model.register_forward_pre_hook(second_forward_fails)
    batch = uint8_batch(16)
    step_with_oom_retry(recovered, batch)
    handle.remove()
    set_micro_batch(reference, 4)
    train_step(reference, batch)
    _assert_same_update(recovered, reference)


@pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\\(\\)` has been overridden")
def test_oom_in_the_optimizer_step_after_unscale_redoes_the_update_exactly() -> None:
    from conftest import uint8_batch

    from quicktrain.engine.oom import step_with_oom_retry
    from quicktrain.engine.step import train_step

    recovered, reference = _oom_states()
    real_step = recovered.optimizer.step
    calls = {"n": 0}

    def allocating_state_fails(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:  # after unscale_ and clipping: a second unscale_ must not raise
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real_step(*args, **kwargs)

    recovered.optimizer.step = allocating_state_fails
    batch = uint8_batch(16)
    step_with_oom_retry(recovered, batch)
    set_micro_batch(reference, 4)
    train_step(reference, batch)
    _assert_same_update(recovered, reference)


def test_oom_under_data_parallelism_stops_with_the_micro_batch_to_resume_with(monkeypatch) -> None:
    from conftest import uint8_batch

    from quicktrain.engine import oom
    from quicktrain.techniques.distributed import Distributed
    from quicktrain.techniques.resolve import Techniques

    state, _ = _oom_states()
    state.techniques = Techniques((*state.techniques.items, Distributed(rank=1, world=2, local_rank=1, backend="gloo")))

    def fails(state, batch):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(oom, "train_step", fails)
    with pytest.raises(
        TrainingError, match="on rank 1 of 2; the ranks must split alike: resume with --micro-batch-size 4"
    ):
        oom.step_with_oom_retry(state, uint8_batch(16))


def test_a_checkpoint_from_more_gpus_resumes_on_fewer(monkeypatch, quicktrain_log):
    """Four GPUs' random states restored on a machine that sees one: the one it has, and a warning
    (set_rng_state_all raised IndexError)."""
    from quicktrain.engine import checkpoint

    restored = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, index: restored.append(index))
    checkpoint._restore_cuda_rng([torch.zeros(4, dtype=torch.uint8)] * 4)
    assert restored == [0] and "random state of 4 GPUs, this process sees 1" in quicktrain_log.text


def test_out_of_memory_recovery_runs_after_the_traceback_is_released(monkeypatch):
    """The activations of the failed attempt are referenced from the traceback's frames while the
    except block runs; recovery (which empties the CUDA cache) must come after it."""
    import gc
    import sys

    from quicktrain.engine import oom

    seen = []
    attempts = {"n": 0}

    def step(state, batch):
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise torch.OutOfMemoryError("simulated")
        return "done"

    def undo(state, before):
        seen.append(sys.exc_info()[0])  # None outside an except block
        gc.collect()

    monkeypatch.setattr(oom, "train_step", step)
    monkeypatch.setattr(oom, "undo_attempt", undo)
    state = make_state(nn.Linear(2, 2), micro_batch_size=4)
    assert oom.step_with_oom_retry(state, None) == "done"
    assert seen == [None] and micro_batch(state) == 2
