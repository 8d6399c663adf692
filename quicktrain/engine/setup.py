"""Build a run from a config: device, data, model, techniques and the training state.

Everything that can reject the user's input happens here, before any file is written.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from quicktrain.config import Config, DataConfig, model_keywords
from quicktrain.data.arrays import Arrays, Split
from quicktrain.data.augment import AugmentSpec
from quicktrain.data.input_spec import IMAGENET_MEAN, IMAGENET_STD, InputSpec
from quicktrain.data.loader import make_loader
from quicktrain.data.prepare import InputPipeline
from quicktrain.data.sources import load_arrays
from quicktrain.data.stats import cached_channel_stats
from quicktrain.engine.guard import NonFiniteGuard
from quicktrain.engine.optim import build_optimizer, build_scheduler
from quicktrain.engine.state import Counters, TrainState
from quicktrain.errors import ConfigError
from quicktrain.models import ModelEntry, check_model, create_model
from quicktrain.models.transfer import Origin, head_names, load_pretrained
from quicktrain.techniques.base import Built, LoaderRequest
from quicktrain.techniques.resolve import Distributed, Techniques, resolve_group, resolve_techniques


@dataclass
class Run:
    config: Config
    device: torch.device
    arrays: Arrays
    techniques: Techniques
    state: TrainState
    train_loader: DataLoader | Any  # torch's, or a technique's own (the device-resident split)
    test_loader: DataLoader | None  # None when the test split is not loaded
    val_loader: DataLoader | None  # None without --val-fraction
    updates_per_epoch: int
    image_size: int
    input: InputSpec  # how images become the model's inputs: the summary's ``input``, what exports carry
    num_params: int
    model_note: str | None = None  # how the net was adapted to the image size, for the banner
    origin: Origin | None = None  # --pretrained RUN_OR_WEIGHTS: what was loaded, what is new
    normalization: Normalization | None = None
    augment: AugmentSpec = field(default_factory=AugmentSpec)  # the training augmentation, resolved
    # counters as of the last completed (evaluated, checkpointed) epoch: what a summary of
    # an interrupted run reports, so time and work always cover the same epochs
    completed: Counters = field(default_factory=Counters)


@dataclass(frozen=True)
class Normalization:
    mean: tuple[float, ...]
    std: tuple[float, ...]
    source: str  # "training split", "ImageNet (pretrained weights)" or "given"

    def describe(self) -> str:
        return f"{self.source} statistics, mean {_triple(self.mean)}, std {_triple(self.std)}"


def _triple(values: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{v:.4f}" for v in values) + ")"


def resolve_normalization(cfg: Config, arrays: Arrays) -> Normalization:
    """--mean/--std when given; ImageNet's for hub weights (they saw those statistics); else
    the training split's own, computed once and cached (a grayscale set gets grayscale ones)."""
    if cfg.data.mean is not None and cfg.data.std is not None:
        return Normalization(_per_channel(cfg.data.mean), _per_channel(cfg.data.std), "given")
    if cfg.model.pretrained == "hub":
        return Normalization(IMAGENET_MEAN, IMAGENET_STD, "ImageNet (pretrained weights)")
    mean, std = cached_channel_stats(arrays.train.images, f"{arrays.name}|{arrays.source}", cfg.data.cache_dir)
    return Normalization(mean, std, "training split")


def resolve_input(cfg: Config, arrays: Arrays, normalization: Normalization, layout: torch.memory_format) -> InputSpec:
    """The run's input record, decided here once: the decode size from the dataset (thumbnails'
    own, ``data.resolution``, or the photo default), the model's size, the crops, normalisation
    and layout. Train, evaluate, predict and export read it; none derives it again."""
    photos, data = arrays.crop == "resized", cfg.data
    return InputSpec(
        crop=arrays.crop,
        size=arrays.image_size,
        image_size=cfg.model.image_size or arrays.image_size,
        mean=normalization.mean,
        std=normalization.std,
        normalization_source=normalization.source,
        crop_pct=data.crop_pct if photos else None,
        store_side=getattr(arrays.train.images, "side", None) if photos else None,
        store_format=getattr(arrays.train.images, "format", None) if photos else None,
        crop_scale=tuple(data.crop_scale) if photos else None,
        crop_ratio=tuple(data.crop_ratio) if photos else None,
        layout="NHWC" if layout == torch.channels_last else "NCHW",
        source_sizes=arrays.source_sizes,
        notes=arrays.notes,
    )


def _model_note(entry: ModelEntry | None, image_size: int) -> str | None:
    if entry is None:
        return "your nn.Module, used as given"
    return entry.note(image_size) if entry.note else None


def _per_channel(values: list[float]) -> tuple[float, ...]:
    return tuple(values) * 3 if len(values) == 1 else tuple(values)  # one value: every channel


def augment_spec(data: DataConfig, normalization: Normalization | None = None, crop: str = "pad") -> AugmentSpec:
    """The training augmentation; ``normalization`` (the inputs' mean and std) is what colour jitter
    works in, so a run passes it; ``crop`` is the dataset's resolved crop (pad or resized)."""
    stats = {} if normalization is None else {"mean": normalization.mean, "std": normalization.std}
    return AugmentSpec(
        crop=crop,
        scale=tuple(data.crop_scale),
        ratio=tuple(data.crop_ratio),
        pad=data.crop_pad,
        flip=data.flip,
        cutout=data.cutout,
        fill=data.crop_fill,
        brightness=data.brightness,
        contrast=data.contrast,
        **stats,
    )


def resolve_device(name: str, local_rank: int | None = None) -> torch.device:
    if local_rank is not None and torch.cuda.is_available() and name.startswith("cuda:"):
        raise ConfigError(
            f"run.device={name} under torchrun would send every process to the same GPU; use --device cuda "
            "(each process takes the GPU of its LOCAL_RANK; choose GPUs with CUDA_VISIBLE_DEVICES)"
        )
    if local_rank is not None and torch.cuda.is_available() and name in ("auto", "cuda"):
        return torch.device("cuda", local_rank)  # one GPU per data-parallel process
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"run.device={name} but no CUDA device is available; use cpu or auto")
    return device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def build_run(
    cfg: Config, progress: bool = True, model: nn.Module | None = None, data: tuple[Any, Any] | None = None
) -> Run:
    """Everything a run needs, from ``cfg``; ``model`` (an ``nn.Module``) and ``data``
    (``(train_data, test_data)`` map-style datasets) replace what the config names."""
    distributed = resolve_group(cfg)  # torchrun: join the group first, it picks this process's GPU
    device = resolve_device(cfg.run.device, distributed.local_rank if distributed.active else None)
    techniques = resolve_techniques(cfg, device, distributed)  # fp16 on CPU fails here, before data loads
    techniques.apply_process()  # before the data and the model allocate; train() restores it
    try:
        return _build(cfg, progress, model, data, device, distributed, techniques)
    except BaseException:
        techniques.restore_process()
        raise


def _build(
    cfg: Config,
    progress: bool,
    model: nn.Module | None,
    data: tuple[Any, Any] | None,
    device: torch.device,
    distributed: Distributed,
    techniques: Techniques,
) -> Run:
    if not distributed.is_main:
        logging.getLogger("quicktrain").setLevel(logging.WARNING)  # rank 0 speaks for all
    entry = check_model(cfg.model.name) if model is None else None
    arrays = load_arrays(cfg.data, progress, cfg.run.seed, data, size_hint=cfg.model.image_size)
    normalization = resolve_normalization(cfg, arrays)  # cached statistics: no random draw
    spec_in = resolve_input(cfg, arrays, normalization, techniques.memory_format)  # the one input record
    seed_everything(cfg.run.seed)  # before the model: its initial weights come from it
    image_size = spec_in.image_size
    hub = "hub" if cfg.model.pretrained == "hub" else None
    if model is None:
        keywords = model_keywords(cfg.model)  # --drop-path, --model-kwargs
        model = create_model(cfg.model.name, arrays.num_classes, image_size, hub, keywords)
    elif model_keywords(cfg.model):
        raise ConfigError(
            "model.drop_path / model.model_kwargs configure a model quicktrain builds; this run was given a "
            "built module: pass the keywords to its constructor instead"
        )
    origin = None  # a run folder or weights file: loaded by name and shape, a new head where classes differ
    if cfg.model.pretrained not in (None, "hub"):
        origin = load_pretrained(model, cfg.model.pretrained, list(arrays.classes))
    model = techniques.prepare_model(model.to(device))
    num_params = sum(p.numel() for p in model.parameters())
    pin = techniques.pinning.active
    inputs = InputPipeline.from_spec(spec_in, device, non_blocking=pin)
    if hasattr(model, "init_from_data"):  # data-dependent initialisation (speedrun_net's whitening)
        sample = torch.from_numpy(arrays.train.images[:5000]).permute(0, 3, 1, 2).to(device)
        model.init_from_data(inputs(sample))
    techniques = techniques.settle(model, image_size, arrays.num_classes, device)

    workers, seed, world, rank = cfg.data.workers, cfg.run.seed, distributed.world, distributed.rank
    augment, spec = cfg.data.augment, augment_spec(cfg.data, normalization, arrays.crop)
    request = LoaderRequest(
        arrays.train, cfg.run.batch_size, seed, device, augment, rank, world, spec, arrays.train.streamed,
        arrays.crop == "resized",
    )  # fmt: skip
    train_loader = techniques.train_loader(request) or make_loader(  # a technique's own (--loader device), or torch's
        arrays.train, cfg.run.batch_size, True, seed, workers, pin, augment, rank, world, spec
    )
    updates_per_epoch = len(train_loader)
    optimizer = build_optimizer(model, cfg.optim, **techniques.optimizer_options())
    total_updates = updates_per_epoch * cfg.run.epochs
    scheduler = build_scheduler(optimizer, cfg.optim, total_updates, updates_per_epoch)
    head = origin.reinitialised if origin and origin.reinitialised else head_names(model)
    techniques.attach(Built(model, optimizer, total_updates, head))  # lookahead's slow weights, frozen parameters
    state = TrainState(
        # compile around DDP, not inside it: torch.compile's DDPOptimizer then splits the graph at the
        # gradient buckets, so all-reduce overlaps backward
        model=techniques.wrap_model(distributed.wrap(model, device)),
        optimizer=optimizer,
        scheduler=scheduler,
        criterion=nn.CrossEntropyLoss(label_smoothing=cfg.optim.label_smoothing),
        inputs=inputs,
        techniques=techniques,
        grad_clip=cfg.optim.grad_clip,
        guard=NonFiniteGuard(cfg.run.on_nonfinite, techniques.precision.needs_scaler, device),
    )
    return Run(
        config=cfg,
        device=device,
        arrays=arrays,
        techniques=techniques,
        state=state,
        train_loader=train_loader,
        test_loader=_eval_loader(arrays.test, cfg, pin, distributed),
        val_loader=_eval_loader(arrays.val, cfg, pin, distributed),
        updates_per_epoch=updates_per_epoch,
        image_size=image_size,
        input=spec_in,
        num_params=num_params,
        model_note=_model_note(entry, image_size),
        origin=origin,
        normalization=normalization,
        augment=spec,
    )


def _eval_loader(split: Split | None, cfg: Config, pin: bool, dist: Distributed) -> DataLoader | None:
    if split is None:
        return None
    return make_loader(
        split, cfg.run.eval_batch_size, False, cfg.run.seed, cfg.data.workers, pin, rank=dist.rank, world=dist.world
    )
