"""The ablation grid: which runs, with which overrides, in which order.

Every arm of a grid is the same training job with a subset of the techniques switched on.
Only the techniques under test differ between arms; the effective batch, the number of
updates, the schedule, the seed of each repeat and so the data order stay fixed.

Example:
    >>> [arm_name(a) for a in arms(("amp", "ga"))]
    ['baseline', 'amp', 'ga', 'amp+ga']
    >>> technique_overrides(("ga",), ("amp", "ga"), accum_steps=4)["techniques.accum_steps"]
    4
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from quicktrain.errors import ConfigError
from quicktrain.records import BASELINE, TECHNIQUES, dataset_slug, model_slug


def parse_techniques(text: str) -> tuple[str, ...]:
    """``"amp,ga"`` -> ``("amp", "ga")``; unknown or repeated names are errors."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ConfigError(f"--techniques '{text}' names no technique; accepted: {', '.join(TECHNIQUES)}")
    for name in names:
        if name not in TECHNIQUES:
            raise ConfigError(f"unknown technique '{name}' in --techniques; accepted: {', '.join(TECHNIQUES)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"--techniques '{text}' names a technique twice")
    return names


def arms(techniques: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every subset, baseline first, then by size, each in the order given."""
    return [c for k in range(len(techniques) + 1) for c in itertools.combinations(techniques, k)]


def arm_name(arm: tuple[str, ...]) -> str:
    return "+".join(arm) if arm else BASELINE


def technique_overrides(arm: tuple[str, ...], techniques: tuple[str, ...], accum_steps: int) -> dict[str, Any]:
    """Config overrides that switch the techniques of ``arm`` on and the others under test off.

    Techniques not under test are left as the base config has them."""
    on = set(arm)
    out: dict[str, Any] = {}
    for name in techniques:
        if name == "amp":
            out["techniques.amp"] = "auto" if name in on else "off"  # auto: the best the hardware has
        elif name == "ga":
            out["techniques.accum_steps"] = accum_steps if name in on else 1
            out["techniques.micro_batch_size"] = None
        elif name == "pin":
            out["techniques.pin_memory"] = name in on
        else:  # channels_last, compile, tf32: config keys of the same name
            out[f"techniques.{name}"] = name in on
    return out


@dataclass(frozen=True)
class Job:
    model: str
    dataset: str
    arm: tuple[str, ...]
    repeat: int
    seed: int
    overrides: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{model_slug(self.model)}__{dataset_slug(self.dataset)}__{arm_name(self.arm)}__r{self.repeat}"


def plan(
    techniques: tuple[str, ...],
    models: list[str],
    datasets: list[str],
    repeats: int,
    base_seed: int,
    accum_steps: int,
) -> list[Job]:
    """All runs, interleaved: every arm of every model and dataset once per repeat
    (A B C ... A B C ...), so drift of the machine hits every arm alike."""
    jobs = []
    for repeat in range(repeats):
        seed = base_seed + repeat
        for model, dataset, arm in itertools.product(models, datasets, arms(techniques)):
            overrides = {
                "model.name": model,
                "data.dataset": dataset,
                "run.seed": seed,
                **technique_overrides(arm, techniques, accum_steps),
            }
            jobs.append(Job(model, dataset, arm, repeat, seed, overrides))
    return jobs
