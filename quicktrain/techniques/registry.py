"""The technique registry: every speed technique, by the name an ablation arm uses.

Torch-free, so ``--help``, the record format and reports can list the techniques without
importing torch. Each :class:`Spec` says what a technique is called, which config key turns it
on (and with which values), how it reads from a run summary (which arm a plain run was), which
values autotune may time, and where its runtime object lives (``"module:function"``, imported
when a run is built). The run builder, the banner, the record, the ablation grid, ``--switch``
and autotune loop over :func:`specs`; none of them names a technique.

Adding a technique: write its module (a :class:`quicktrain.techniques.base.Technique` and a
``resolve(cfg, device, distributed)`` function), add its :class:`Spec` to ``_BUILTIN`` below (or
call :func:`register` from your own code), and test it.

    >>> [s.name for s in specs()][:3]
    ['amp', 'ga', 'pin']
    >>> spec("channels_last").arm_overrides(True)
    {'techniques.channels_last': True}
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Overrides = dict[str, Any]


@dataclass(frozen=True)
class Spec:
    """What the registry knows of a technique before a run is built."""

    name: str  # the ablation arm's name, e.g. "amp"
    about: str  # one line for --help
    key: str | None  # its config key, e.g. "techniques.amp"; None: not an ablation arm (always resolved)
    on: Any = True  # the key's value in an ablation arm that has it
    off: Any = False  # ... and in one that does not
    resolve: str | Callable[..., Any] = ""  # "module:function" or a callable: (cfg, device, distributed) -> Technique
    tune: Sequence[Any] | str | Callable[..., Sequence[Any]] | None = None  # autotune's values, first = off
    was_on: Callable[[dict[str, Any]], bool] | None = None  # from a run summary; default: its field is truthy
    extra: Overrides = field(default_factory=dict)  # further overrides of every arm, with it or without
    study: bool = False  # one of the three techniques the study combined

    def arm_overrides(self, enabled: bool, accum_steps: int = 4) -> Overrides:
        """Config overrides of an ablation arm with this technique on (or off)."""
        if self.key is None:
            raise ValueError(f"technique '{self.name}' has no config key: it is not an ablation arm")
        value = self.on if enabled else self.off
        if callable(value):  # e.g. ga: the arm's accumulation steps
            value = value(accum_steps)
        return {self.key: value, **self.extra}

    def active_in(self, summary: dict[str, Any]) -> bool:
        """Whether a run's summary says this technique was on."""
        if self.was_on is not None:
            return self.was_on(summary)
        field_name = self.name if self.name in summary else (self.key or self.name).rpartition(".")[2]
        return summary.get(field_name) not in (None, False, 0, "", self.off)

    def tune_values(self, device_type: str, with_compile: bool) -> list[Any]:
        """The values autotune times on ``device_type`` (first: the plain one)."""
        if self.tune is None:
            return [self.off]
        if isinstance(self.tune, (str,)) or callable(self.tune):
            return list(_load(self.tune)(device_type, with_compile))
        return list(self.tune)

    def load(self) -> Callable[..., Any]:
        """The function that resolves this technique for a run."""
        if not self.resolve:
            raise LookupError(f"technique '{self.name}' has no resolve function")
        return _load(self.resolve)


def _load(target: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _accum(steps: int) -> int:
    return steps


_BUILTIN = (
    Spec(
        "amp",
        "mixed precision: autocast to bf16 (CPU or GPU) or fp16 (CUDA, with GradScaler); 'auto' in an arm",
        "techniques.amp",
        on="auto",
        off="off",
        resolve="quicktrain.techniques.precision:resolve",
        tune="quicktrain.techniques.precision:tune_values",
        was_on=lambda s: s.get("amp") not in (None, "off"),
        study=True,
    ),
    Spec(
        "ga",
        "gradient accumulation: the same effective batch in --accum-steps micro-batches",
        "techniques.accum_steps",
        on=_accum,
        off=1,
        resolve="quicktrain.techniques.accumulation:resolve",
        was_on=lambda s: (s.get("accum_steps") or 1) > 1,
        extra={"techniques.micro_batch_size": None},  # the arm sets the split through accum_steps
        study=True,
    ),
    Spec(
        "pin",
        "pinned host memory and asynchronous copies to the GPU",
        "techniques.pin_memory",
        resolve="quicktrain.techniques.pinning:resolve",
        study=True,
    ),
    Spec(
        "channels_last",
        "NHWC memory format for images and convolution weights",
        "techniques.channels_last",
        resolve="quicktrain.techniques.layout:resolve_channels_last",
        tune=(False, True),
    ),
    Spec(
        "compile",
        "torch.compile the model",
        "techniques.compile",
        resolve="quicktrain.techniques.layout:resolve_compile",
        tune=lambda device, with_compile: (False, True) if with_compile or device == "cuda" else (False,),
    ),
    Spec(
        "loader",
        "the training split held on the device, cropped and flipped there (data.loader=device)",
        "data.loader",
        on="device",
        off="torch",
        resolve="quicktrain.techniques.device_data:resolve",
        tune=("torch", "device"),
        was_on=lambda s: s.get("loader") == "device",
    ),
    Spec(
        "tf32",
        "CUDA: TF32 matmuls and convolutions",
        "techniques.tf32",
        resolve="quicktrain.techniques.cuda:resolve_tf32",
        tune=lambda device, with_compile: (False, True) if device == "cuda" else (False,),
    ),
    Spec(
        "gemm_wgrad",
        "CPU: weight gradients of small 3x3 convolutions as matrix products",
        "techniques.gemm_wgrad",
        resolve="quicktrain.techniques.cpu:resolve_gemm_wgrad",
    ),
    Spec(
        "cpu_allocator",
        "CPU under glibc: keep freed memory for the next step instead of page-faulting it back",
        "techniques.cpu_allocator",
        on="retain",
        off="system",
        resolve="quicktrain.techniques.cpu:resolve_allocator",
        was_on=lambda s: s.get("cpu_allocator") == "retain",
    ),
    Spec(
        "grad_ckpt",
        "gradient checkpointing: activations recomputed in the backward pass (timm models)",
        "model.grad_checkpointing",
        resolve="quicktrain.techniques.checkpointing:resolve",
        was_on=lambda s: bool(s.get("grad_checkpointing")),
    ),
    Spec(
        "sync_bn",
        "torchrun: BatchNorm statistics over the global batch",
        "techniques.sync_bn",
        resolve="quicktrain.techniques.sync_bn:resolve",
    ),
    Spec(
        "ddp",
        "torchrun: data parallelism, gradients all-reduced once per update (always resolved; not an arm)",
        None,
        resolve="quicktrain.techniques.distributed:resolve",
    ),
    Spec(
        "lookahead",
        "weight averaging by lookahead, as the speedrun recipes (optim.lookahead; not an arm)",
        None,
        resolve="quicktrain.techniques.averaging:resolve",
    ),
    Spec(
        "low_res",
        "progressive resizing: the first epochs at a lower resolution (data.low_res; not an arm)",
        None,
        resolve="quicktrain.techniques.resolution:resolve",
    ),
    Spec(
        "early_params",
        "parameters trained for the first epochs only, or frozen for them (optim.early_params, freeze_epochs)",
        None,
        resolve="quicktrain.techniques.early_params:resolve",
    ),
    Spec(
        "ema",
        "an exponential moving average of the weights (decay 0.999 in an arm), scored and saved",
        "optim.model_ema",
        on=0.999,
        off=None,
        resolve="quicktrain.techniques.ema:resolve",
        was_on=lambda s: s.get("model_ema") is not None,
    ),
    Spec(
        "auto_augment",
        "an automatic augmentation policy per image (rand-m9-mstd0.5 in an arm)",
        "data.auto_augment",
        on="rand-m9-mstd0.5",
        off=None,
        resolve="quicktrain.techniques.auto_augment:resolve",
        was_on=lambda s: s.get("auto_augment") is not None,
    ),
    Spec(
        "reprob",
        "random erasing: a rectangle of random bytes per image (probability 0.25 in an arm)",
        "data.reprob",
        on=0.25,
        off=0.0,
        resolve="quicktrain.techniques.auto_augment:resolve_erasing_arm",
    ),
    Spec(
        "mixup",
        "MixUp: each batch blended with itself reversed, soft targets (alpha 0.8 in an arm)",
        "data.mixup",
        on=0.8,
        off=0.0,
        resolve="quicktrain.techniques.mixing:resolve",
    ),
    Spec(
        "cutmix",
        "CutMix: a box of the reversed batch pasted into each image, soft targets (alpha 1.0 in an arm)",
        "data.cutmix",
        on=1.0,
        off=0.0,
        resolve="quicktrain.techniques.mixing:resolve_cutmix_arm",
    ),
    Spec(
        "cuda_kernels",
        "CUDA: cudnn.benchmark and fused optimizer kernels (always on with a GPU; not an arm)",
        None,
        resolve="quicktrain.techniques.cuda:resolve_kernels",
    ),
)

_REGISTRY: dict[str, Spec] = {s.name: s for s in _BUILTIN}
BASELINE = "baseline"  # the arm with none of them


def register(new: Spec) -> Spec:
    """Add a technique (e.g. from a plugin or a test); its name must be new."""
    if new.name in _REGISTRY or new.name == BASELINE:
        raise ValueError(f"technique '{new.name}' is already registered")
    if not new.name.replace("_", "").isalnum():
        raise ValueError(f"technique name '{new.name}' must be letters, digits and underscores")
    _REGISTRY[new.name] = new
    return new


def unregister(name: str) -> None:
    """Remove a technique added with :func:`register` (built-in ones stay)."""
    if name in {s.name for s in _BUILTIN}:
        raise ValueError(f"'{name}' is built in and cannot be removed")
    _REGISTRY.pop(name, None)


def specs() -> list[Spec]:
    """Every registered technique, built-in first, in registration order."""
    return list(_REGISTRY.values())


def spec(name: str) -> Spec:
    if name not in _REGISTRY:
        raise KeyError(f"unknown technique '{name}'; registered: {', '.join(arm_names())}")
    return _REGISTRY[name]


def arm_names() -> tuple[str, ...]:
    """The techniques an ablation can switch."""
    return tuple(n for n, s in _REGISTRY.items() if s.key is not None)


def study_names() -> tuple[str, ...]:
    return tuple(s.name for s in _REGISTRY.values() if s.study)


def technique_arm(summary: dict[str, Any]) -> str:
    """The combination a run used, from what its summary says was active.

    >>> technique_arm({"amp": "bf16", "accum_steps": 4})
    'amp+ga'
    """
    return "+".join(n for n in arm_names() if _REGISTRY[n].active_in(summary)) or BASELINE
