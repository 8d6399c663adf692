"""Shared fixtures: tiny configs, hand-built training states, an isolated decode cache."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from quicktrain.config import Config
from quicktrain.data.prepare import InputPipeline
from quicktrain.engine.state import TrainState
from quicktrain.techniques.accumulation import Accumulation
from quicktrain.techniques.precision import Precision
from quicktrain.techniques.resolve import Techniques

REPO = Path(__file__).resolve().parents[1]
CIFAR10_JPEG = REPO.parent / "shared" / "datasets" / "cifar10-jpeg"


@pytest.fixture
def quicktrain_log(caplog: pytest.LogCaptureFixture):
    """``caplog`` for the "quicktrain" logger at INFO, which the CLI's logging set-up may have
    stopped propagating to caplog's root handler."""
    logger = logging.getLogger("quicktrain")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="quicktrain"):
            yield caplog
    finally:
        logger.removeHandler(caplog.handler)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUICKTRAIN_CACHE", str(tmp_path_factory.mktemp("cache")))


def tiny_config(out: Path | None = None, **overrides: Any) -> Config:
    """A seconds-long run: tiny model, synthetic data, no bars, no event files."""
    base = {
        "data.dataset": "synthetic",
        "data.max_train_samples": 96,
        "data.max_test_samples": 40,
        "model.name": "test_vit",
        "run.epochs": 1,
        "run.batch_size": 32,
        "run.progress": False,
        "run.tensorboard": False,
        "techniques.amp": "off",
    }
    if out is not None:
        base["run.out"] = str(out)
    base.update(overrides)
    return Config.from_overrides(base)


def make_state(
    model: nn.Module,
    micro_batch_size: int,
    lr: float = 0.1,
    scaler: torch.amp.GradScaler | None = None,
    precision: Precision | None = None,
    grad_clip: float | None = None,
    momentum: float = 0.0,
) -> TrainState:
    """A TrainState around ``model`` with plain SGD and a constant schedule, on CPU; its techniques:
    accumulation in micro-batches of ``micro_batch_size`` (the window is whatever batch the step
    gets) and ``precision`` (fp32 by default) with ``scaler`` inside it."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    precision = precision or Precision("off", None, "cpu")
    if scaler is not None:
        precision = dataclasses.replace(precision, scaler=scaler)
    accumulation = Accumulation(batch_size=10**9, micro_batch_size=micro_batch_size, accum_steps=1)
    return TrainState(
        model=model,
        optimizer=optimizer,
        scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
        criterion=nn.CrossEntropyLoss(),
        inputs=InputPipeline(torch.device("cpu")),
        techniques=Techniques((accumulation, precision)),
        grad_clip=grad_clip,
    )


def micro_batch(state: TrainState) -> int:
    """The micro-batch size the state's accumulation technique splits windows into."""
    return state.techniques.accumulation.micro_batch_size


def set_micro_batch(state: TrainState, size: int) -> None:
    state.techniques = state.techniques.with_item(state.techniques.accumulation.with_micro_batch(size))


def uint8_batch(n: int, num_classes: int = 10, size: int = 32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8, generator=g)
    y = torch.randint(0, num_classes, (n,), generator=g)
    return x, y


def ctrl_c_at_evaluation(monkeypatch: pytest.MonkeyPatch, call: int = 2) -> None:
    """Make the ``call``-th evaluation of a run raise KeyboardInterrupt (a crash after that
    many epochs were checkpointed); ``monkeypatch.undo()`` or a new patch restores it."""
    from quicktrain.engine import loop

    real = loop.evaluate
    calls = {"n": 0}

    def dies(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "evaluate", dies)
