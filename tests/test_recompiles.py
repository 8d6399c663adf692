"""torch.compile's graph count over a run with every shape/mode change quicktrain makes, counted
with dynamo's counters on the CPU (the eager backend: dynamo traces and guards as it does for
inductor, without the minutes of C++ compilation)."""

from __future__ import annotations

import pytest
import torch
from conftest import REPO, tiny_config

from quicktrain import train
from quicktrain.config import Config
from quicktrain.techniques.layout import compiled_graphs


@pytest.fixture
def eager_compile(monkeypatch: pytest.MonkeyPatch):
    import torch._dynamo

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, backend="eager"))
    torch._dynamo.reset()  # no graphs cached by earlier tests for these forwards
    yield
    torch._dynamo.reset()


def _speedrun_like(out, tta: str) -> Config:
    """The speedrun preset's changes within one run: a short last batch, evaluation (no grad)
    with flip-and-shift views on the least confident half, 24 px then 32 px, and the whitening
    bias frozen after the first epochs (a requires_grad flip)."""
    return Config.load(
        REPO / "configs" / "speedrun_cifar10.yaml",
        {
            "data.dataset": "synthetic", "data.max_train_samples": 100, "data.max_test_samples": 50,
            "data.loader": "torch", "data.low_res": 24, "data.low_res_epochs": 1,
            "optim.early_params": "whiten.bias", "optim.early_epochs": 2,
            "run.epochs": 3, "run.eval_every": 1, "run.batch_size": 32, "run.eval_batch_size": 32,
            "run.tta": tta, "run.tta_fraction": 0.5, "run.target_accuracy": None,
            "run.progress": False, "run.tensorboard": False, "run.out": str(out),
            "techniques.compile": True,
        },
    )  # fmt: skip


def test_a_speedrun_like_run_stays_well_under_dynamos_recompile_limit(tmp_path, eager_compile):
    result = train(_speedrun_like(tmp_path / "tta", "flip_translate"))
    graphs = result.summary["compiled_graphs"]
    assert graphs == compiled_graphs()  # the record counts this run's graphs (the cache was empty)
    # train 24 px, short batch (then the batch dimension is dynamic), eval, train 32 px, frozen
    # bias: 6 graphs; evaluation views in another memory layout used to add one per resolution
    limit = getattr(torch._dynamo.config, "recompile_limit", None) or torch._dynamo.config.cache_size_limit
    assert 4 <= graphs <= 6 < limit

    torch._dynamo.reset()
    plain = train(_speedrun_like(tmp_path / "plain", "off")).summary["compiled_graphs"]
    assert graphs == plain  # the six TTA views, the least-confident subset included, add no graph


def test_a_middle_resolution_stage_adds_no_graph(tmp_path, eager_compile):
    two = train(_speedrun_like(tmp_path / "two", "off")).summary["compiled_graphs"]
    torch._dynamo.reset()
    cfg = _speedrun_like(tmp_path / "three", "off")
    cfg = Config.from_overrides({"data.mid_res": 28, "data.mid_res_epochs": 1, "run.epochs": 4}, base=cfg)
    assert train(cfg).summary["compiled_graphs"] == two  # 24, 28, 32 px: the size is dynamic after 24


def test_a_run_past_the_recompile_limit_says_so(tmp_path, eager_compile, quicktrain_log):
    import torch._dynamo.config as dynamo

    # dynamo's own patch, not monkeypatch: pytest 9.2 (not 9.0) undoes a setattr on this module (whose
    # options live behind __getattr__) with delattr, which hides the option from every later test
    with dynamo.patch(recompile_limit=2):
        cfg = tiny_config(tmp_path, **{"data.max_train_samples": 40, "run.batch_size": 16, "techniques.compile": True})
        assert train(cfg).summary["compiled_graphs"] >= 2
    assert "recompile limit (2)" in quicktrain_log.text
