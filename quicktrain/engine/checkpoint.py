"""Checkpoints: everything needed to continue a run exactly, written so a crash cannot
leave a half one that is taken for whole.

Saved: model, optimizer and scheduler state; every technique's state (the fp16 scaler, the slow weights
of weight averaging, the EMA);
counters; the torch RNG states; the data position (epoch and batches done in it: order and
augmentation are functions of (seed, epoch), so that is all the loader needs); the config.
Each file is written atomically (temporary file, fsync, rename) and followed by a ``.sha256``
file; a checkpoint whose checksum is missing or wrong is not valid. ``--resume auto`` takes
the newest valid one and reports any newer that was skipped. Files are loaded with
``weights_only=True``: only tensors and plain containers, no code.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
from pathlib import Path
from typing import Any

import torch

from quicktrain.atomic import atomic_write, atomic_write_text
from quicktrain.engine.state import TrainState
from quicktrain.errors import ConfigError
from quicktrain.techniques.base import unwrap
from quicktrain.weights_file import read_weights

log = logging.getLogger("quicktrain")

_NAME = re.compile(r"checkpoint-epoch(\d+)-update(\d+)\.pt$")


def capture(state: TrainState, config: dict[str, Any], position: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """``position``: (epoch, batches done in it); an epoch-end checkpoint is (next epoch, 0)."""
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return {
        "format": 1,
        "model": unwrap(state.model).state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "scheduler": state.scheduler.state_dict(),
        "techniques": state.techniques.state_dict(),  # the fp16 scaler, lookahead's slow weights, the EMA, ...
        "counters": state.counters.state_dict(),
        "position": {"epoch": position[0], "batch": position[1]},
        "rng": rng,
        "config": config,
    }


def restore(state: TrainState, ckpt: dict[str, Any]) -> None:
    unwrap(state.model).load_state_dict(ckpt["model"])
    state.optimizer.load_state_dict(ckpt["optimizer"])
    state.scheduler.load_state_dict(ckpt["scheduler"])
    state.techniques.load_state_dict(_techniques_state(ckpt))
    state.counters.load_state_dict(ckpt["counters"])
    torch.set_rng_state(ckpt["rng"]["torch"])
    if "cuda" in ckpt["rng"] and torch.cuda.is_available():
        _restore_cuda_rng(ckpt["rng"]["cuda"])


def _techniques_state(ckpt: dict[str, Any]) -> dict[str, Any]:
    """The techniques' states; checkpoints written before the scaler and the slow weights moved into
    their techniques kept them under keys of their own (read under the techniques' names)."""
    state = dict(ckpt.get("techniques", {}))
    if ckpt.get("scaler"):
        state.setdefault("amp", {"scaler": ckpt["scaler"]})
    if ckpt.get("averaging"):
        state.setdefault("lookahead", ckpt["averaging"])
    return state


def _restore_cuda_rng(states: list[torch.Tensor]) -> None:
    """One generator state per GPU the checkpoint's process saw; a resume that sees fewer (or more)
    GPUs restores those it has, and says so."""
    count = torch.cuda.device_count()
    for index, state in enumerate(states[:count]):
        torch.cuda.set_rng_state(state, index)
    if len(states) != count:
        log.warning(
            f"the checkpoint holds the random state of {len(states)} GPUs, this process sees {count}: "
            f"restored {min(len(states), count)}"
        )


def save_checkpoint(folder: Path, payload: dict[str, Any], keep: int) -> Path:
    """Write ``payload`` and its checksum; keep the newest ``keep`` checkpoints."""
    pos = payload["position"]
    path = folder / f"checkpoint-epoch{pos['epoch']:04d}-update{payload['counters']['num_updates']:09d}.pt"
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    data = buffer.getvalue()
    atomic_write(path, lambda f: f.write(data))
    atomic_write_text(_sum_file(path), hashlib.sha256(data).hexdigest() + "\n")  # last: marks it complete
    for old in list_checkpoints(folder)[:-keep]:
        old.unlink(missing_ok=True)
        _sum_file(old).unlink(missing_ok=True)
    return path


def _sum_file(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def list_checkpoints(folder: Path) -> list[Path]:
    """Checkpoint files in ``folder``, oldest first (valid or not)."""
    if not folder.is_dir():
        return []
    found = [(tuple(map(int, m.groups())), p) for p in folder.iterdir() if (m := _NAME.search(p.name))]
    return [p for _, p in sorted(found)]


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint after checking its checksum; a clear error when it is not valid."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"run.resume: checkpoint '{path}' does not exist")
    data = path.read_bytes()
    sums = _sum_file(path)
    if sums.is_file() and hashlib.sha256(data).hexdigest() != sums.read_text().strip():
        raise ConfigError(f"run.resume: checkpoint '{path}' is corrupt (checksum mismatch)")
    if not sums.is_file() and _NAME.search(path.name):
        raise ConfigError(f"run.resume: checkpoint '{path}' is incomplete (no checksum file)")
    return read_weights(io.BytesIO(data), path, "run.resume: ")


def newest_valid(folder: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint in ``folder`` that loads, saying which newer ones were skipped."""
    for path in reversed(list_checkpoints(folder)):
        try:
            return path, load_checkpoint(path)
        except ConfigError as err:
            log.warning(f"skipping {err}".replace("run.resume: ", ""))
    return None


def resume_folder(resume: str, out: str | None) -> Path | None:
    """The run folder a resumed run continues in: ``--out`` when given, else the folder
    holding the checkpoint (``RUN/checkpoints/checkpoint-*.pt``); unknown for ``auto``
    without ``--out``."""
    if out:
        return Path(out)
    return None if resume == "auto" else Path(resume).parent.parent


def find_resume(resume: str, run_dir: Path | None) -> tuple[Path, dict[str, Any]]:
    """``auto`` -> the newest valid checkpoint in the run folder; else the path given."""
    if resume != "auto":
        return Path(resume), load_checkpoint(Path(resume))
    if run_dir is None:
        raise ConfigError("run.resume=auto needs the run folder: pass --out RUN_FOLDER")
    found = newest_valid(run_dir / "checkpoints")
    if found is None:
        raise ConfigError(
            f"run.resume=auto found no valid checkpoint in '{run_dir}/checkpoints'; pass --out of an earlier run"
        )
    return found
