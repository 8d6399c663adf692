"""`--micro-batch-size auto`: the largest micro-batch that fits, and the accumulation to match."""

from __future__ import annotations

import pytest
import torch
from conftest import micro_batch, tiny_config

from quicktrain.config import Config
from quicktrain.engine.setup import build_run
from quicktrain.errors import ConfigError, TrainingError
from quicktrain.techniques.micro_batch import Prober, largest_fitting


def test_simulated_memory_limit_picks_the_largest_divisor_that_fits() -> None:
    tried = []

    def fits(size: int) -> bool:
        tried.append(size)
        return size <= 24  # a device that holds 24 samples

    micro = largest_fitting(128, fits)
    assert micro == 16 and 128 // micro == 8 and tried == [128, 64, 32, 16]
    with pytest.raises(TrainingError, match="not even a micro-batch of 1"):
        largest_fitting(8, lambda size: False)


def test_cuda_style_probe_backs_off_on_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    prober = Prober(torch.nn.Linear(3, 2), None, 4, 2, torch.device("cpu"))  # type: ignore[arg-type]

    def step(size: int) -> None:
        if size > 12:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(prober, "_step", step)
    assert largest_fitting(96, prober.cuda_fits) == 12


def test_cpu_budget_decides_and_the_run_uses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tiny_config(
        None, **{"model.name": "test_resnet", "run.batch_size": 32, "techniques.micro_batch_size": "auto"}
    )
    monkeypatch.setenv("QUICKTRAIN_CPU_MEMORY_MB", "100000")
    assert build_run(cfg, progress=False).techniques.accumulation.micro_batch_size == 32  # all fits
    reference = build_run(cfg, progress=False)
    estimate = Prober(reference.state.model, reference.techniques.precision, 32, 10, torch.device("cpu")).cpu_estimate()
    budget_mb = (estimate(8) + estimate(16)) / 2 / 2**20  # room for 8, not for 16
    monkeypatch.setenv("QUICKTRAIN_CPU_MEMORY_MB", str(budget_mb))
    run = build_run(cfg, progress=False)
    acc = run.techniques.accumulation
    assert (acc.micro_batch_size, acc.accum_steps, micro_batch(run.state)) == (8, 4, 8)
    # probing changed nothing: the same initial weights and BatchNorm statistics as without it
    plain = build_run(Config.from_overrides({"techniques.micro_batch_size": 8}, cfg), progress=False)
    a, b = run.state.model.state_dict(), plain.state.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_auto_leaves_accumulation_to_itself() -> None:
    with pytest.raises(ConfigError, match="auto chooses the accumulation steps"):
        Config.from_overrides({"techniques.micro_batch_size": "auto", "techniques.accum_steps": 2})
