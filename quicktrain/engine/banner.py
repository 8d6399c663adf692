"""The start-up banner: what was asked for and what was derived from it (principle 8), one line
per topic, every technique's line from its own ``banner``."""

from __future__ import annotations

import torch

from quicktrain.config import model_keywords
from quicktrain.data.arrays import Arrays
from quicktrain.data.imagefolder import describe_sizes
from quicktrain.data.input_spec import InputSpec
from quicktrain.engine.setup import Run


def photo_line(spec: InputSpec, streamed: bool) -> str:
    """The banner's line for a folder of photos, from the run's input record: source sizes, training
    and evaluation crops, store."""
    kept = "decoded per batch from the files" if streamed else "a memory-mapped store"
    return (
        f"{describe_sizes(spec.source_sizes)}; aspect kept, shorter side {spec.store_side} px in {kept}; "
        f"trained on {spec.size} px random resized crops, evaluated on the centre {spec.size} px after resizing the "
        f"shorter side to {spec.resize_to} px (crop_pct {spec.crop_pct:g})"
    )


def _split_sizes(arrays: Arrays) -> str:
    parts = [f"{len(arrays.train)} train"]
    if arrays.val is not None:
        parts.append(f"{len(arrays.val)} validation")
    parts.append(f"{len(arrays.test)} test" if arrays.test is not None else "test split not loaded")
    return " / ".join(parts)


def describe(run: Run) -> list[str]:
    """The start-up banner: what was asked for and what was derived from it."""
    cfg, t, acc = run.config, run.techniques, run.techniques.accumulation
    lines = [
        f"quicktrain: {cfg.model.name} ({run.num_params / 1e6:.2f}M params) on {run.arrays.name}: "
        f"{_split_sizes(run.arrays)} images, "
        f"{run.arrays.num_classes} classes, {run.image_size} px",
        *([f"  model         {run.model_note}"] if run.model_note else []),
        *([f"  pretrained    {run.origin.banner()}"] if run.origin else []),
        *(
            [f"  model kwargs  {', '.join(f'{k}={v}' for k, v in keywords.items())}"]
            if (keywords := model_keywords(cfg.model))
            else []
        ),
        f"  device        {run.device}"
        + ("" if run.device.type == "cuda" else f" ({torch.get_num_threads()} threads)"),
        f"  batch         {cfg.run.batch_size} effective"
        + (f" = {t.distributed.world} processes x {acc.batch_size}" if t.distributed.active else "")
        + f" = {acc.micro_batch_size} micro-batch x {acc.accum_steps} accumulation step"
        + ("s" if acc.accum_steps > 1 else "")
        + (" per process" if t.distributed.active else ""),
        f"  updates       {run.updates_per_epoch} per epoch x {cfg.run.epochs} epochs = "
        f"{run.updates_per_epoch * cfg.run.epochs} optimizer updates" + _last_window(run),
        *t.banner_lines(),
        f"  inputs        uint8 to the device, normalised with {run.normalization.describe()}"
        + (f", resized to {cfg.model.image_size} px there" if cfg.model.image_size else "")
        + (
            ", training split held on the device (--loader device)"
            if cfg.data.loader == "device"
            else f", {cfg.data.workers} loader workers"
        )
        + (", streamed: each batch decoded from its files when loaded" if run.arrays.train.streamed else ""),
        *(
            [f"  photos        {photo_line(run.input, run.arrays.train.streamed)}"]
            if run.input.crop == "resized"
            else []
        ),
        *(f"  data          {note}" for note in run.input.notes),
        f"  augment       {run.augment.describe() if cfg.data.augment else 'off'}",
        f"  optimizer     {cfg.optim.optimizer}"
        + (
            f" (conv/hidden weights: lr {cfg.optim.muon_lr:g}, momentum {cfg.optim.muon_momentum:g}"
            + (", fixed norm" if cfg.optim.muon_fixed_norm else "")
            + f", {cfg.optim.muon_ns_steps} Newton-Schulz steps in {run.state.optimizer.ns_precision}; the rest SGD)"
            if cfg.optim.optimizer == "muon"
            else ""
        )
        + f", lr {cfg.optim.lr:g} ({cfg.optim.schedule}), "
        f"weight decay {cfg.optim.weight_decay:g}, grad clip {cfg.optim.grad_clip or 'off'}"
        + (f", norm shifts' lr x{cfg.optim.norm_bias_lr_scale:g}" if cfg.optim.norm_bias_lr_scale != 1 else "")
        + (f", {_layer_decay_words(run.state.optimizer, cfg.optim.layer_decay)}" if cfg.optim.layer_decay else ""),
        f"  evaluation    test-time augmentation {cfg.run.tta}, every "
        + (f"{cfg.run.eval_every} epochs and after the last" if cfg.run.eval_every > 1 else "epoch")
        + (f", and every {cfg.run.eval_every_steps} updates" if cfg.run.eval_every_steps else "")
        + " (never timed as training)",
    ]
    stops = [f"{cfg.run.epochs} epochs"]
    if cfg.run.target_accuracy is not None:
        verb = "stop at" if cfg.run.stop_at_target else "record the time to"
        stops.append(f"{verb} test accuracy {cfg.run.target_accuracy:g}")
    if cfg.run.max_time is not None:
        stops.append(f"at most {cfg.run.max_time:g}s of training")
    lines.append("  stop          " + ", ".join(stops))
    return lines


def _last_window(run: Run) -> str:
    """Say so when the epoch ends in a shorter window (it is still one full update)."""
    acc = run.techniques.accumulation
    last = acc.plan(len(run.arrays.train))[-1]
    if sum(last) == acc.batch_size:
        return ""
    return f" (each epoch's last: {sum(last)} samples in {len(last)} micro-batch{'es' if len(last) > 1 else ''})"


def _layer_decay_words(optimizer: torch.optim.Optimizer, decay: float) -> str:
    scales = sorted({g.get("lr_scale", 1.0) for g in optimizer.param_groups})
    return f"layer decay {decay:g} ({len(scales)} depths, lr x{scales[0]:.3g} .. x{scales[-1]:.3g})"
