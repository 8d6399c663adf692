"""The ablation grid: which runs, with which overrides, in which order.

Every arm of a grid is the same training job with a subset of the techniques switched on.
Only the techniques under test differ between arms; the effective batch, the number of
updates, the schedule, the seed of each repeat and so the data order stay fixed.

Example:
    >>> [arm_name(a) for a in arms(("amp", "ga"))]
    ['baseline', 'amp', 'ga', 'amp+ga']
    >>> technique_overrides(("ga",), ("amp", "ga"), accum_steps=4)["techniques.accum_steps"]
    4

Beyond the built-in techniques, an ablation can toggle any recipe ingredient defined as a
*switch*: a name and the config overrides that turn it on (and, when the base config already has
it on, those that turn it off), e.g. ``muon=optim.optimizer=muon`` or
``lookahead=optim.lookahead=0.77/optim.lookahead=null``.

    >>> parse_switch("lowres=data.low_res=24,data.low_res_epochs=3")
    Switch(name='lowres', on={'data.low_res': 24, 'data.low_res_epochs': 3}, off={})
    >>> parse_switch("pre=model.pretrained=runs/source/best.pt").on  # a path's "/" is no separator
    {'model.pretrained': 'runs/source/best.pt'}
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from quicktrain.config import parse_override
from quicktrain.errors import ConfigError
from quicktrain.records import BASELINE, dataset_slug, model_slug
from quicktrain.techniques.registry import arm_names, spec

_OFF = re.compile(r"/(?=\s*[A-Za-z_]\w*\.\w+=)")  # the "/" before the off-overrides' first section.key=


@dataclass(frozen=True)
class Switch:
    """A recipe ingredient an ablation toggles: config overrides for on, and for off (empty:
    the base config's values)."""

    name: str
    on: dict[str, Any]
    off: dict[str, Any]


def _overrides(text: str, where: str) -> dict[str, Any]:
    out = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        if "=" not in item or "." not in item.partition("=")[0]:
            raise ConfigError(f"--switch '{where}': '{item}' is not of the form section.key=value")
        key, value = parse_override(item)  # the value read as YAML, as on the command line
        out[key] = value
    return out


def parse_switch(text: str) -> Switch:
    """``NAME=KEY=VALUE[,KEY=VALUE...][/KEY=VALUE,...]``: on-overrides, then optional off-overrides."""
    name, eq, rest = text.partition("=")
    name = name.strip()
    if not eq or not name.replace("_", "").isalnum():
        raise ConfigError(f"--switch '{text}' must be NAME=section.key=value[,...][/section.key=value,...]")
    if name in arm_names() or name == BASELINE:
        raise ConfigError(f"--switch name '{name}' is taken by a built-in technique; choose another")
    # "/" starts the off-overrides only where a section.key= follows it, so values may be paths
    on_text, off_text = ([*_OFF.split(rest, maxsplit=1), ""])[:2]
    on = _overrides(on_text, text)
    if not on:
        raise ConfigError(f"--switch '{text}' turns nothing on: give at least one section.key=value")
    return Switch(name, on, _overrides(off_text, text))


def parse_techniques(text: str, switches: dict[str, Switch] | None = None) -> tuple[str, ...]:
    """``"amp,ga"`` -> ``("amp", "ga")``; unknown or repeated names are errors. Names of
    ``switches`` are accepted beside the built-in techniques."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    known = (*arm_names(), *(switches or {}))
    if not names:
        raise ConfigError(f"--techniques '{text}' names no technique; accepted: {', '.join(known)}")
    for name in names:
        if name not in known:
            raise ConfigError(
                f"unknown technique '{name}' in --techniques; accepted: {', '.join(known)} (or define it with --switch)"
            )
    if len(set(names)) != len(names):
        raise ConfigError(f"--techniques '{text}' names a technique twice")
    return names


DESIGNS = ("factorial", "single")


def arms(techniques: tuple[str, ...], design: str = "factorial") -> list[tuple[str, ...]]:
    """``factorial``: every subset, baseline first, then by size, each in the order given.
    ``single``: the baseline and each technique alone (n + 1 arms), as when each switch takes one
    ingredient out of a recipe that is the base config.

    >>> arms(("muon", "lowres"), "single")
    [(), ('muon',), ('lowres',)]
    """
    if design not in DESIGNS:
        raise ConfigError(f"--design '{design}' is not one of {', '.join(DESIGNS)}")
    sizes = range(len(techniques) + 1) if design == "factorial" else (0, 1)
    return [c for k in sizes for c in itertools.combinations(techniques, k)]


def arm_name(arm: tuple[str, ...]) -> str:
    return "+".join(arm) if arm else BASELINE


def technique_overrides(
    arm: tuple[str, ...], techniques: tuple[str, ...], accum_steps: int, switches: dict[str, Switch] | None = None
) -> dict[str, Any]:
    """Config overrides that switch the techniques of ``arm`` on and the others under test off.

    Techniques not under test are left as the base config has them."""
    on = set(arm)
    out: dict[str, Any] = {}
    for name in techniques:
        if switches and name in switches:
            out.update(switches[name].on if name in on else switches[name].off)
        else:  # a registered technique: its spec says which config values mean on and off
            out.update(spec(name).arm_overrides(name in on, accum_steps))
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
    switches: dict[str, Switch] | None = None,
    design: str = "factorial",
) -> list[Job]:
    """All runs, interleaved: every arm of every model and dataset once per repeat
    (A B C ... A B C ...), so drift of the machine hits every arm alike."""
    jobs = []
    for repeat in range(repeats):
        seed = base_seed + repeat
        for model, dataset, arm in itertools.product(models, datasets, arms(techniques, design)):
            overrides = {
                "model.name": model,
                "data.dataset": dataset,
                "run.seed": seed,
                **technique_overrides(arm, techniques, accum_steps, switches),
            }
            jobs.append(Job(model, dataset, arm, repeat, seed, overrides))
    return jobs
