"""The run folder: a new one (refusing to overwrite a record), or the one a resumed run
continues in, with the checkpoint to resume from and the check that the config still
computes the same run."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from quicktrain.config import Config
from quicktrain.engine.checkpoint import find_resume, resume_folder
from quicktrain.errors import ConfigError
from quicktrain.records import model_slug

# config keys a resumed run may change: they do not alter what is computed
RESUMABLE_CHANGES = {
    "run.out",
    "run.resume",
    "run.progress",
    "run.tensorboard",
    "run.keep_checkpoints",
    "run.checkpoint_every_steps",
    "data.workers",
    "data.cache_dir",
    "data.loader",  # the device loader yields the DataLoader path's batches
    "run.eval_every",  # evaluation only reads the model
    "run.tta",
    "run.eval_every_steps",
    "run.target_accuracy",  # recorded, or (with stop_at_target) where to stop: the steps before are the same
    "run.stop_at_target",
    "run.max_time",  # a budget may be extended for the resumed part
    "run.early_stop",
    "run.mlflow",
    "run.log_wandb",
    "data.max_image_pixels",  # a file over the limit stops a run; it never changes one
}


def prepare_folder(cfg: Config, create: bool = True) -> tuple[Path, dict[str, Any] | None]:
    """The run folder, and the checkpoint to resume from (if any)."""
    ckpt = None
    if cfg.run.resume:
        folder = resume_folder(cfg.run.resume, cfg.run.out)
        path, ckpt = find_resume(cfg.run.resume, folder)  # refuses auto without a folder
        ckpt["path"] = str(path)
        check_same_run(cfg, ckpt["config"], path)
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        dataset = cfg.data.dataset.partition(":")[0]
        folder = Path(cfg.run.out or f"runs/{stamp}-{model_slug(cfg.model.name)}-{dataset}")
        if create and (folder / "config.yaml").exists():
            raise ConfigError(
                f"run.out '{folder}' already holds a run record; choose another --out, or --resume auto to continue it"
            )
    if not create:
        return folder, ckpt
    try:
        (folder / "checkpoints").mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ConfigError(f"run.out '{folder}' is not writable: {err.strerror}") from None
    return folder, ckpt


def check_same_run(cfg: Config, saved: dict[str, Any], path: Path) -> None:
    now = cfg.to_dict()
    for section, values in saved.items():
        for key, value in values.items():
            dotted = f"{section}.{key}"
            if dotted not in RESUMABLE_CHANGES and now[section].get(key, value) != value:
                raise ConfigError(
                    f"cannot resume from '{path}': {dotted} was {value!r} there, now {now[section][key]!r}"
                )
