"""Checkpoints: everything needed to continue a run exactly, written atomically.

Saved: model, optimizer, scheduler and scaler state; counters; the torch RNG states; the
config. Data order and augmentation are functions of (seed, epoch), so they need no state.
Files are loaded with ``weights_only=True``: only tensors and plain containers, no code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from quicktrain.atomic import atomic_write
from quicktrain.engine.state import TrainState
from quicktrain.errors import ConfigError
from quicktrain.techniques.layout import unwrap

_NAME = re.compile(r"checkpoint-epoch(\d+)\.pt$")


def capture(state: TrainState, config: dict[str, Any]) -> dict[str, Any]:
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return {
        "format": 1,
        "model": unwrap(state.model).state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "scheduler": state.scheduler.state_dict(),
        "scaler": state.scaler.state_dict(),
        "counters": state.counters.state_dict(),
        "rng": rng,
        "config": config,
    }


def restore(state: TrainState, ckpt: dict[str, Any]) -> None:
    unwrap(state.model).load_state_dict(ckpt["model"])
    state.optimizer.load_state_dict(ckpt["optimizer"])
    state.scheduler.load_state_dict(ckpt["scheduler"])
    state.scaler.load_state_dict(ckpt["scaler"])
    state.counters.load_state_dict(ckpt["counters"])
    torch.set_rng_state(ckpt["rng"]["torch"])
    if "cuda" in ckpt["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(ckpt["rng"]["cuda"])


def save_checkpoint(folder: Path, epoch: int, payload: dict[str, Any], keep: int) -> Path:
    path = folder / f"checkpoint-epoch{epoch:04d}.pt"
    atomic_write(path, lambda f: torch.save(payload, f))
    for old in list_checkpoints(folder)[:-keep]:
        old.unlink(missing_ok=True)
    return path


def list_checkpoints(folder: Path) -> list[Path]:
    """Checkpoints in ``folder``, oldest first."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if _NAME.search(p.name)), key=lambda p: p.name)


def load_checkpoint(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"run.resume: checkpoint '{path}' does not exist")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated or foreign files raise several types
        raise ConfigError(f"run.resume: cannot read checkpoint '{path}': {err}") from None


def resume_folder(resume: str, out: str | None) -> Path | None:
    """The run folder a resumed run continues in: ``--out`` when given, else the folder
    holding the checkpoint (``RUN/checkpoints/checkpoint-*.pt``); unknown for ``auto``
    without ``--out``."""
    if out:
        return Path(out)
    return None if resume == "auto" else Path(resume).parent.parent


def find_resume(resume: str, run_dir: Path | None) -> Path:
    """``auto`` -> newest checkpoint in the run folder; else the path given."""
    if resume != "auto":
        return Path(resume)
    if run_dir is None:
        raise ConfigError("run.resume=auto needs the run folder: pass --out RUN_FOLDER")
    found = list_checkpoints(run_dir / "checkpoints")
    if not found:
        raise ConfigError(
            f"run.resume=auto found no checkpoint in '{run_dir}/checkpoints'; pass --out of an earlier run"
        )
    return found[-1]
