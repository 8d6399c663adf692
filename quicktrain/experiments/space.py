"""Search spaces for ``quicktrain tune``: config keys mapped to Optuna distributions.

A space is a mapping from a dotted config key to a spec, in YAML or Python::

    optim.lr: {type: float, low: 1.0e-4, high: 0.3, log: true}
    optim.optimizer: {type: categorical, choices: [sgd, adam, adamw]}
    optim.weight_decay: {type: float, low: 1.0e-6, high: 1.0e-2, log: true, zero: true}  # or exactly 0
    optim.grad_clip: {type: float, low: 0.1, high: 10, log: true, off: true}            # or no clipping
    optim.label_smoothing: {type: float, low: 0.0, high: 0.2}
    run.batch_size: {type: categorical, choices: [64, 128, 256]}

Example:
    >>> import optuna
    >>> overrides(optuna.trial.FixedTrial({"optim.lr": 0.1, "optim.grad_clip.off": True}),
    ...           {"optim.lr": DEFAULT_SPACE["optim.lr"], "optim.grad_clip": DEFAULT_SPACE["optim.grad_clip"]})
    {'optim.lr': 0.1, 'optim.grad_clip': None}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quicktrain.config import known_keys, load_yaml
from quicktrain.errors import ConfigError

# the study's four: learning rate, optimizer, weight decay (including none), clipping (or none)
DEFAULT_SPACE: dict[str, dict[str, Any]] = {
    "optim.lr": {"type": "float", "low": 1e-4, "high": 0.3, "log": True},
    "optim.optimizer": {"type": "categorical", "choices": ["sgd", "adam", "adamw"]},
    "optim.weight_decay": {"type": "float", "low": 1e-6, "high": 1e-2, "log": True, "zero": True},
    "optim.grad_clip": {"type": "float", "low": 0.1, "high": 10.0, "log": True, "off": True},
}
TYPES = ("float", "int", "categorical")


def load_space(path: str | Path) -> dict[str, dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"search-space file '{path}' does not exist")
    raw = load_yaml(path.read_text(), source=f"search space '{path}'")
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"search-space file '{path}' must map config keys to specs, e.g. optim.lr: {{type: float}}")
    return check_space(raw)


def check_space(space: dict[str, Any]) -> dict[str, dict[str, Any]]:
    keys = set(known_keys())
    for key, spec in space.items():
        if key not in keys:
            raise ConfigError(f"search space: unknown config key '{key}'")
        if not isinstance(spec, dict) or spec.get("type") not in TYPES:
            raise ConfigError(f"search space: {key} needs a 'type' of {', '.join(TYPES)}")
        if spec["type"] == "categorical":
            if not isinstance(spec.get("choices"), list) or not spec["choices"]:
                raise ConfigError(f"search space: {key} needs a non-empty list of 'choices'")
            continue
        low, high = spec.get("low"), spec.get("high")
        if not isinstance(low, int | float) or not isinstance(high, int | float) or low >= high:
            raise ConfigError(f"search space: {key} needs numbers low < high, got low={low!r} high={high!r}")
        if spec.get("log") and low <= 0:
            raise ConfigError(f"search space: {key} is log-uniform, so low must be positive, got {low}")
    return space


def overrides(trial: Any, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Ask ``trial`` (an Optuna trial) for a value of every key; return config overrides."""
    out: dict[str, Any] = {}
    for key, spec in space.items():
        if spec.get("zero") and trial.suggest_categorical(f"{key}.zero", [False, True]):
            out[key] = 0.0
        elif spec.get("off") and trial.suggest_categorical(f"{key}.off", [False, True]):
            out[key] = None
        elif spec["type"] == "categorical":
            out[key] = trial.suggest_categorical(key, spec["choices"])
        elif spec["type"] == "int":
            out[key] = trial.suggest_int(key, int(spec["low"]), int(spec["high"]), log=bool(spec.get("log")))
        else:
            out[key] = trial.suggest_float(key, float(spec["low"]), float(spec["high"]), log=bool(spec.get("log")))
    return out
