"""timm train.py's flags on quicktrain's command line: each one means what it means in timm, or is
refused with one line naming quicktrain's spelling; none is silently ignored or abbreviated.

Used by :mod:`quicktrain.cli` only. Three kinds:

* **aliases** (:data:`ALIASES`): the same value, the same meaning (``--opt`` is ``--optimizer``);
  listed beside quicktrain's flag in ``--help``.
* **timm forms** (:func:`add_timm_flags`): bare ``--amp`` / ``--model-ema`` / ``--pretrained`` take
  timm's default (fp16, decay 0.9998, the hub weights), ``--amp-dtype``, ``--drop``,
  ``--torchcompile``, ``--experiment``, ``--hflip 0.5``, ``--train-split train``, ``--val-split``.
* **refused** (:data:`REFUSED`): flags quicktrain has no meaning for, each with the nearest option.

Where a default differs from timm's, the flag's help says so (:data:`DIFFERS`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

# config key -> timm's spelling of the same flag
ALIASES = {
    "optim.optimizer": ("--opt",),
    "optim.schedule": ("--sched",),
    "optim.label_smoothing": ("--smoothing",),
    "optim.grad_clip": ("--clip-grad",),
    "optim.model_ema": ("--model-ema-decay",),
    "techniques.accum_steps": ("--grad-accum-steps",),
    "model.image_size": ("--img-size",),
    "run.out": ("--output",),
    "run.batch_size": ("-b",),
    "data.workers": ("-j",),
    "data.auto_augment": ("--aa",),
    "data.crop_scale": ("--scale",),
    "data.crop_ratio": ("--ratio",),
}

# config key -> the value a bare flag takes (timm's flag-only form and its default)
BARE = {"optim.model_ema": 0.9998, "model.pretrained": "hub", "techniques.amp": "fp16"}

# config key -> how quicktrain's default or meaning differs from timm's (appended to the help)
DIFFERS = {
    "run.batch_size": "timm's -b is the batch of one micro-batch on one process; here it is the effective batch "
    "of one update, split into --grad-accum-steps micro-batches (and across torchrun processes)",
    "optim.model_ema_warmup": "on here, off in timm (--model-ema-warmup there)",
    "techniques.amp": "a bare --amp is timm's: fp16 (bf16 with --amp-dtype bfloat16); quicktrain's default, auto, "
    "is bf16 on CPUs and GPUs that have it",
    "data.data_dir": "alone (no --dataset) it means what timm means: an image folder, as --dataset imagefolder:PATH",
}

# timm flags with no quicktrain meaning -> the nearest quicktrain option
REFUSED = {
    "--num-classes": "quicktrain takes the classes from the dataset (imagefolder: its class folders; --classes "
    "picks some)",
    "--min-lr": "quicktrain's schedules end at lr 0; choose the shape with --schedule "
    "(onecycle, cosine, triangle, linear, constant)",
    "--warmup-lr": "quicktrain's cosine warm-up starts near lr 0 and lasts --warmup-epochs",
    "--color-jitter": "use --brightness B --contrast C (in standard deviations of the normalised input, not "
    "timm's factors)",
    "--interpolation": "quicktrain resizes with antialiased bilinear (timm's default); there is no option",
    "--log-interval": "quicktrain logs every epoch (metrics.jsonl, TensorBoard); --eval-every-steps N adds "
    "evaluations within an epoch",
}

TIMM_EMA_DECAY = 0.9998


class _Bare(argparse.Action):
    """A flag that also stands alone (timm's form): bare, it takes ``bare`` unless the same setting
    was already given (``--amp-dtype bfloat16 --amp`` keeps bf16)."""

    def __init__(self, *args: Any, bare: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bare = bare

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        if values is None and hasattr(namespace, self.dest):
            return
        setattr(namespace, self.dest, self.bare if values is None else values)


def bare_kwargs(key: str) -> dict[str, Any]:
    """argparse keywords for a config flag that timm also uses bare (:data:`BARE`)."""
    if key not in BARE:
        return {}
    return {"nargs": "?", "action": _Bare, "bare": BARE[key]}  # const None: a bare flag passes None


class _Mapped(argparse.Action):
    """Sets config key ``dest`` from a timm value through ``mapping`` (value -> ours, or a refusal)."""

    def __init__(self, *args: Any, mapping: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mapping = mapping

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        ours, refusal = self.mapping(values)
        if refusal:
            parser.error(f"{option_string} {values}: {refusal}")
        if ours is not None:
            setattr(namespace, self.dest, ours)


class _Drop(argparse.Action):
    """timm's ``--drop R`` (classifier dropout): ``drop_rate=R`` added to ``--model-kwargs``."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        kept = [k for k in getattr(namespace, self.dest, None) or [] if not k.startswith("drop_rate=")]
        setattr(namespace, self.dest, [*kept, f"drop_rate={values}"])


class _Refused(argparse.Action):
    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        parser.error(f"{option_string} is timm's; {REFUSED[option_string]}")


def _amp_dtype(value: str) -> tuple[str | None, str | None]:
    return {"bfloat16": "bf16", "float16": "fp16"}.get(value), None


def _hflip(value: float) -> tuple[str | None, str | None]:
    if value == 0.5:
        return "random", None
    return None, (
        "quicktrain flips with probability 0.5 (--flip random) or every other epoch (--flip alternate); "
        "--no-augment turns crops and flips off"
    )


def _train_split(value: str) -> tuple[str | None, str | None]:
    return (None, None) if value == "train" else (None, "imagefolder:PATH trains on PATH/train")


def _val_split(value: str) -> tuple[str | None, str | None]:
    if value in ("test", "validation", "val"):
        return value, None
    return None, "imagefolder:PATH evaluates on PATH/test, PATH/validation or PATH/val (--eval-split)"


def _compile(value: str) -> tuple[bool | None, str | None]:
    return (True, None) if value == "inductor" else (None, "quicktrain compiles with inductor only (--compile)")


def add_timm_flags(parser: argparse.ArgumentParser) -> None:
    """timm's forms that are not plain aliases, and the refused flags (hidden from --help; the
    docs list them)."""
    group = parser.add_argument_group("timm train.py flags (each as in timm)")
    hidden = argparse.SUPPRESS
    group.add_argument(
        "--amp-dtype", dest="techniques.amp", action=_Mapped, mapping=_amp_dtype, choices=("bfloat16", "float16"),
        default=hidden, help="with --amp: bfloat16 is --amp bf16, float16 --amp fp16",
    )  # fmt: skip
    group.add_argument(
        "--drop", dest="model.model_kwargs", action=_Drop, type=float, metavar="RATE", default=hidden,
        help="classifier dropout: --model-kwargs drop_rate=RATE (timm models)",
    )  # fmt: skip
    group.add_argument(
        "--torchcompile", dest="techniques.compile", action=_Mapped, mapping=_compile, nargs="?", const="inductor",
        metavar="BACKEND", default=hidden, help="--compile (inductor)",
    )  # fmt: skip
    group.add_argument(
        "--experiment", dest="_experiment", metavar="NAME", default=hidden,
        help="the run folder is OUTPUT/NAME (--output, default runs)",
    )  # fmt: skip
    group.add_argument(
        "--hflip", dest="data.flip", action=_Mapped, mapping=_hflip, type=float, metavar="P", default=hidden,
        help="0.5 only: --flip random",
    )  # fmt: skip
    group.add_argument(
        "--train-split", dest="_train_split", action=_Mapped, mapping=_train_split, metavar="NAME", default=hidden,
        help="train only: imagefolder:PATH trains on PATH/train",
    )  # fmt: skip
    group.add_argument(
        "--val-split", dest="data.eval_split", action=_Mapped, mapping=_val_split, metavar="NAME", default=hidden,
        help="--eval-split NAME: test, validation or val",
    )  # fmt: skip
    for flag in REFUSED:
        parser.add_argument(flag, action=_Refused, nargs="?", help=hidden, default=hidden)


def apply_experiment(flags: dict[str, Any], experiment: str | None) -> None:
    """timm's ``--output DIR --experiment NAME``: the run folder DIR/NAME (DIR default ``runs``)."""
    if experiment:
        flags["run.out"] = str(Path(flags.get("run.out") or "runs") / experiment)
