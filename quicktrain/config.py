"""One frozen, typed config tree.

Resolution order: the defaults below (the offline quick start), then a YAML preset, then
``key=value`` overrides (CLI flags are overrides too). Unknown keys and wrong types raise
:class:`ConfigError` naming the key; impossible combinations fail when the tree is built.

Example:
    >>> cfg = Config.from_overrides({"optim.lr": 0.05, "run.epochs": 2})
    >>> cfg.optim.lr, cfg.accumulation()
    (0.05, (128, 1))
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from quicktrain.errors import ConfigError


@dataclass(frozen=True)
class DataConfig:
    dataset: str = "sample"  # sample | synthetic[:CLASSES] | cifar10 | cifar100 | imagefolder:PATH
    data_dir: str = "data"  # where cifar10/cifar100 live (torchvision's on-disk layout)
    download: bool = False  # fetch cifar10/cifar100 when online
    max_train_samples: int | None = None  # class-balanced, fixed subset for quick runs
    max_test_samples: int | None = None
    workers: int = 0  # DataLoader worker processes
    loader: Literal["torch", "device"] = "torch"  # device: the training split kept on the device, augmented there
    augment: bool = True  # random crop (zero padding) + horizontal flip on the training split
    crop_pad: int = 4  # the random crop's padding: shifts of up to this many pixels
    flip: Literal["random", "alternate"] = "random"  # alternate: each image mirrored every other epoch
    cutout: int = 0  # blank a random square of this side in each training image; 0: off
    resolution: int = 32  # imagefolder images of another size are resized to this on decode
    cache_dir: str | None = None  # decoded-array cache; default ~/.cache/quicktrain
    val_fraction: float = 0.0  # class-balanced validation split carved out of train (seeded by run.seed)
    load_test: bool = True  # read and evaluate the test split; tuning turns it off


@dataclass(frozen=True)
class ModelConfig:
    name: str = "resnet18"
    image_size: int | None = None  # resize inputs on the device; None keeps the data's size
    pretrained: str | None = None  # PATH to a local state dict, or "hub" (timm download)


@dataclass(frozen=True)
class OptimConfig:
    optimizer: Literal["sgd", "adam", "adamw"] = "sgd"
    lr: float = 0.2  # peak learning rate of the schedule
    momentum: float = 0.9  # sgd only
    nesterov: bool = True  # sgd only
    weight_decay: float = 5e-4  # not applied to biases and norm weights
    grad_clip: float | None = None  # max global grad norm, applied after unscaling
    label_smoothing: float = 0.0
    schedule: Literal["onecycle", "cosine", "triangle", "constant"] = "onecycle"
    warmup_epochs: float = 1.0  # cosine only; onecycle warms up for 30% of updates, triangle for 23%
    norm_bias_lr_scale: float = 1.0  # learning rate multiplier for the shifts (biases) of norm layers
    lookahead: float | None = None  # weight averaging: the slow weights' decay at the end of training
    lookahead_every: int = 5  # optimizer updates between two averaging steps


@dataclass(frozen=True)
class TechniquesConfig:
    amp: Literal["off", "bf16", "fp16", "auto"] = "auto"
    micro_batch_size: int | Literal["auto"] | None = None  # with run.batch_size, sets accum_steps; auto: fit memory
    accum_steps: int | None = None  # with run.batch_size, sets micro_batch_size
    pin_memory: bool = False
    channels_last: bool = False
    compile: bool = False


@dataclass(frozen=True)
class RunConfig:
    epochs: int = 6
    batch_size: int = 128  # the effective batch: samples per optimizer update
    eval_batch_size: int = 256
    tta: Literal["off", "flip", "flip_translate"] = "off"  # test-time augmentation in evaluation
    eval_every: int = 1  # evaluate every N epochs (and always after the last)
    eval_every_steps: int | None = None  # also evaluate every N optimizer updates (time to target per update)
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    out: str | None = None  # default runs/<time>-<model>-<dataset>
    target_accuracy: float | None = None  # record when test accuracy first reaches it
    stop_at_target: bool = False  # end training at the first evaluation that reaches target_accuracy
    max_time: float | None = None  # stop after this many seconds of training time (evaluation excluded)
    resume: str | None = None  # checkpoint path, or "auto": newest in run.out
    progress: bool = True  # progress bars
    tensorboard: bool = True  # TensorBoard event files in the run folder
    keep_checkpoints: int = 2  # newest N checkpoints kept
    checkpoint_every_steps: int | None = None  # also checkpoint every S optimizer updates (mid-epoch)
    on_nonfinite: Literal["stop", "skip"] = "stop"  # a NaN/Inf loss without fp16's GradScaler


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    techniques: TechniquesConfig = field(default_factory=TechniquesConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        _validate(self)

    # ---- derived values -------------------------------------------------------------
    def accumulation(self, world: int = 1) -> tuple[int, int]:
        """(micro_batch_size, accum_steps) of one process, from the effective (global) batch
        size shared by ``world`` data-parallel processes."""
        if self.run.batch_size % world:
            raise ConfigError(
                f"run.batch_size={self.run.batch_size} is the global batch and must divide evenly over "
                f"{world} processes; use a multiple of {world}"
            )
        return _split_batch(self.run.batch_size // world, self.techniques.micro_batch_size, self.techniques.accum_steps)

    # ---- construction ---------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Config:
        return _build(cls, raw, prefix="")

    @classmethod
    def from_overrides(cls, overrides: dict[str, Any], base: Config | None = None) -> Config:
        """Apply dotted-key overrides (``{"optim.lr": 0.05}``) to ``base`` (or the defaults)."""
        tree = (base or cls()).to_dict()
        for key, value in overrides.items():
            _set_dotted(tree, key, value)
        return cls.from_dict(tree)

    @classmethod
    def load(cls, path: str | Path, overrides: dict[str, Any] | None = None) -> Config:
        """Read a YAML preset (missing keys keep their defaults), then apply overrides."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file '{path}' does not exist")
        raw = load_yaml(path.read_text(), source=f"config file '{path}'")
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(f"config file '{path}' must hold a mapping of sections")
        base = cls.from_dict(raw)
        return cls.from_overrides(overrides or {}, base=base)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def smoke(cfg: Config) -> Config:
    """The same model, image size, optimizer and techniques for one update on a few
    generated images with the preset's number of classes: a CPU check that a preset builds
    and trains, without data or weight downloads."""
    classes = {"cifar100": 100}.get(cfg.data.dataset, 10)
    return Config.from_overrides(
        {
            "data.dataset": f"synthetic:{classes}",
            "data.max_train_samples": 4,
            "data.max_test_samples": 4,
            "data.download": False,
            "data.workers": 0,
            "model.pretrained": None,
            "run.epochs": 1,
            "run.batch_size": 4,
            "run.eval_batch_size": 4,
            "run.device": "cpu",
            "run.tensorboard": False,
            "run.target_accuracy": None,
            "run.stop_at_target": False,
            "run.max_time": None,
            "run.eval_every_steps": None,
            "techniques.amp": "auto" if cfg.techniques.amp == "fp16" else cfg.techniques.amp,
            "techniques.micro_batch_size": None,
            "techniques.accum_steps": None,
            "techniques.compile": False,
        },
        base=cfg,
    )


def known_keys() -> list[str]:
    """Every dotted key the tree accepts, e.g. ``optim.lr``."""
    return [
        f"{section.name}.{leaf.name}"
        for section in dataclasses.fields(Config)
        for leaf in dataclasses.fields(_section_types()[section.name])
    ]


def parse_override(item: str) -> tuple[str, Any]:
    """``"optim.lr=0.05"`` -> ``("optim.lr", 0.05)``, the value read as YAML."""
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"override '{item}' is not of the form section.key=value")
    return key.strip(), load_yaml(text, source=f"override '{item}'") if text.strip() else None


# ---- YAML without YAML 1.1's surprises ---------------------------------------------------
class _Loader(yaml.SafeLoader):
    """Safe loader where only true/false are booleans, so ``amp: off`` stays the string."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_yaml(text: str, source: str = "YAML") -> Any:
    """Parse with the safe loader; a syntax error or a refused tag (``!!python/...``) is a
    :class:`ConfigError` naming ``source`` and the line."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.constructor.ConstructorError as err:
        tag = f" ({err.problem})" if err.problem else ""
        raise ConfigError(
            f"{source} uses a YAML tag that quicktrain does not load{tag}{_where(err)}; only plain values, lists "
            "and mappings are accepted"
        ) from None
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{source} is not valid YAML: {problem}{_where(err)}") from None


def _where(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


# ---- typed construction -------------------------------------------------------------
def _section_types() -> dict[str, type]:
    hints = typing.get_type_hints(Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(Config)}


def _build(cls: type, raw: Any, prefix: str) -> Any:
    where = prefix.rstrip(".") or "config"
    if not isinstance(raw, dict):
        raise ConfigError(f"'{where}' must be a mapping, got {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ConfigError(f"unknown config key '{prefix}{unknown[0]}'; known keys in {where}: {', '.join(names)}")
    kwargs = {}
    for name, value in raw.items():
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = _build(tp, value, f"{prefix}{name}.")
        else:
            kwargs[name] = _check_type(f"{prefix}{name}", value, tp)
    return cls(**kwargs)


def _check_type(key: str, value: Any, tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        inner = [t for t in options if t is not type(None)]
        if len(inner) == 1:
            return _check_type(key, value, inner[0])
        for option in inner:  # e.g. int | Literal["auto"]: the first type that takes the value
            try:
                return _check_type(key, value, option)
            except ConfigError:
                pass
        accepted = " or ".join(
            "/".join(map(str, typing.get_args(t))) if typing.get_origin(t) is Literal else f"an {t.__name__}"
            for t in inner
        )
        raise ConfigError(f"{key}={value!r} is not accepted; use {accepted}")
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{key}={value!r} is not accepted; choose one of: {', '.join(map(str, choices))}")
        return value
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),
        str: isinstance(value, str),
    }[tp]
    if not ok:
        raise ConfigError(f"{key}={value!r} has the wrong type; expected {tp.__name__}")
    return float(value) if tp is float else value


def _set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    section, _, leaf = key.partition(".")
    if section not in tree or not leaf or "." in leaf:
        raise ConfigError(
            f"unknown config key '{key}'; keys look like section.name with section one of: " + ", ".join(tree)
        )
    if leaf not in tree[section]:
        raise ConfigError(f"unknown config key '{key}'; known keys in {section}: {', '.join(tree[section])}")
    tree[section][leaf] = value


# ---- combinations -------------------------------------------------------------------
def _split_batch(batch: int, micro: int | str | None, accum: int | None) -> tuple[int, int]:
    if micro == "auto":
        if accum is not None:
            raise ConfigError("techniques.micro_batch_size=auto chooses the accumulation steps; do not set accum_steps")
        return batch, 1  # until the run measures what fits (engine/setup.py)
    if micro is None and accum is None:
        return batch, 1
    if micro is not None and accum is not None:
        if micro * accum != batch:
            raise ConfigError(
                f"techniques.micro_batch_size={micro} x techniques.accum_steps={accum} "
                f"= {micro * accum}, but run.batch_size={batch}; set one of them, not both"
            )
        return micro, accum
    if micro is not None:
        if batch % micro:
            raise ConfigError(
                f"run.batch_size={batch} is not divisible by techniques.micro_batch_size={micro}; "
                f"accepted micro-batch sizes divide it, e.g. {_divisors(batch)}"
            )
        return micro, batch // micro
    assert accum is not None
    if batch % accum:
        raise ConfigError(
            f"run.batch_size={batch} is not divisible by techniques.accum_steps={accum}; "
            f"accepted accumulation steps divide it, e.g. {_divisors(batch)}"
        )
    return batch // accum, accum


def _number(value: int | str | None) -> int | None:
    return value if isinstance(value, int) else None


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0 and d <= 512)


def _validate(cfg: Config) -> None:
    positive = {
        "run.epochs": cfg.run.epochs,
        "run.batch_size": cfg.run.batch_size,
        "run.eval_batch_size": cfg.run.eval_batch_size,
        "run.eval_every": cfg.run.eval_every,
        "run.keep_checkpoints": cfg.run.keep_checkpoints,
        "run.checkpoint_every_steps": cfg.run.checkpoint_every_steps,
        "run.eval_every_steps": cfg.run.eval_every_steps,
        "run.max_time": cfg.run.max_time,
        "optim.lr": cfg.optim.lr,
        "data.resolution": cfg.data.resolution,
        "data.max_train_samples": cfg.data.max_train_samples,
        "data.max_test_samples": cfg.data.max_test_samples,
        "model.image_size": cfg.model.image_size,
        "techniques.micro_batch_size": _number(cfg.techniques.micro_batch_size),
        "techniques.accum_steps": cfg.techniques.accum_steps,
        "optim.grad_clip": cfg.optim.grad_clip,
        "optim.norm_bias_lr_scale": cfg.optim.norm_bias_lr_scale,
        "optim.lookahead_every": cfg.optim.lookahead_every,
    }
    for key, value in positive.items():
        if value is not None and value <= 0:
            raise ConfigError(f"{key}={value} must be positive")
    non_negative = {
        "data.workers": cfg.data.workers,
        "data.crop_pad": cfg.data.crop_pad,
        "data.cutout": cfg.data.cutout,
        "optim.weight_decay": cfg.optim.weight_decay,
        "optim.momentum": cfg.optim.momentum,
        "optim.warmup_epochs": cfg.optim.warmup_epochs,
    }
    for key, value in non_negative.items():
        if value < 0:
            raise ConfigError(f"{key}={value} must be zero or positive")
    if not 0.0 <= cfg.data.val_fraction < 1.0:
        raise ConfigError(f"data.val_fraction={cfg.data.val_fraction} must be in [0, 1), e.g. 0.1")
    if not cfg.data.load_test and cfg.run.target_accuracy is not None:
        raise ConfigError("run.target_accuracy needs the test split; it cannot be used with data.load_test=false")
    if cfg.run.stop_at_target and cfg.run.target_accuracy is None:
        raise ConfigError("run.stop_at_target needs run.target_accuracy (e.g. --target-accuracy 0.9)")
    if cfg.optim.lookahead is not None and not 0.0 < cfg.optim.lookahead < 1.0:
        raise ConfigError(f"optim.lookahead={cfg.optim.lookahead} must be in (0, 1), e.g. 0.77, or null for off")
    if not 0.0 <= cfg.optim.label_smoothing < 1.0:
        raise ConfigError(f"optim.label_smoothing={cfg.optim.label_smoothing} must be in [0, 1)")
    if cfg.run.target_accuracy is not None and not 0.0 < cfg.run.target_accuracy <= 1.0:
        raise ConfigError(
            f"run.target_accuracy={cfg.run.target_accuracy} must be a fraction in (0, 1], e.g. 0.9 for 90%"
        )
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.run.device):
        raise ConfigError(f"run.device='{cfg.run.device}' is not accepted; use auto, cpu, cuda or cuda:N")
    cfg.accumulation()  # raises on an impossible split
