"""After training: load a run's model as it was trained, evaluate it on any dataset, predict
labels for image files (:mod:`quicktrain.export` writes it in other formats).

A run is its folder (``config.yaml``, ``summary.json``, ``model.pt`` or ``best.pt``) or one of
those weights files inside it. The model is rebuilt from the run's config with the run's number
of classes, image size and normalisation, and the weights must match it exactly.

Example:
    >>> loaded = load_run("runs/my-run")  # doctest: +SKIP
    >>> loaded.classes[:2], loaded.image_size  # doctest: +SKIP
    (['airplane', 'automobile'], 32)
"""

from __future__ import annotations

import csv
import functools
import io
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from quicktrain.atomic import atomic_write, atomic_write_text
from quicktrain.config import Config, model_keywords
from quicktrain.data.input_spec import InputSpec
from quicktrain.errors import ConfigError, DataError
from quicktrain.weights_file import read_weights


@dataclass
class LoadedRun:
    folder: Path
    config: Config
    summary: dict[str, Any]
    model: nn.Module
    inputs: Any  # InputPipeline with the run's normalisation and image size
    precision: Any
    classes: list[str]
    image_size: int
    weights: Path

    @functools.cached_property
    def input(self) -> InputSpec:
        """How the run turned image files into inputs: its summary's ``input`` record (runs recorded
        before it held every field get the rest from the summary and config they have)."""
        return input_spec(self.summary, self.config)

    def decode(self, path: Path) -> np.ndarray:
        """One image file as the run's evaluation saw it: (size, size, 3) uint8."""
        spec = self.input
        if spec.crop == "resized":
            from quicktrain.data.photo_store import eval_crop

            return eval_crop(path, spec.store_side, spec.size, spec.crop_pct, spec.store_format or "raw")
        from quicktrain.data.decode import decode_image

        return decode_image(path, spec.size)


def input_spec(summary: dict[str, Any], config: Config) -> InputSpec:
    """A run's :class:`InputSpec` from its record."""
    norm = summary.get("normalization") or {}
    image_size = int(summary["image_size"])
    fallback = {
        "crop": "pad",
        "size": config.data.resolution or image_size,
        "image_size": config.model.image_size or image_size,
        "layout": "NHWC" if config.techniques.channels_last else "NCHW",
        **({"mean": norm["mean"], "std": norm["std"], "normalization_source": norm.get("source")} if norm else {}),
    }
    return InputSpec.from_record(summary.get("input") or {}, fallback)


def load_run(path: str | Path, weights: str = "model.pt", device: str = "auto", trust_code: bool = False) -> LoadedRun:
    """The model of a run folder (or of a weights file in one), on ``device`` (auto: the GPU when
    there is one, as ``train`` picks), in eval mode. A run trained in fp16 (CUDA only) is evaluated
    in the best precision the device has natively (``amp=auto``). A model factory file named by the
    run's config is imported only when it is the file the run recorded, or with ``trust_code``
    (:func:`quicktrain.models.external.check_recorded_code`)."""
    from quicktrain.data.prepare import InputPipeline
    from quicktrain.engine.setup import resolve_device
    from quicktrain.models import create_model
    from quicktrain.models.external import check_recorded_code
    from quicktrain.techniques.precision import resolve_precision

    path = Path(path)
    folder, file = (path, path / weights) if path.is_dir() else (path.parent, path)
    for needed in (folder / "config.yaml", folder / "summary.json", file):
        if not needed.is_file():
            raise ConfigError(
                f"'{needed}' does not exist; give a run folder (with config.yaml, summary.json, {weights})"
            )
    cfg = Config.load(folder / "config.yaml")
    summary = json.loads((folder / "summary.json").read_text())
    classes = summary.get("classes") or [str(i) for i in range(summary["num_classes"])]
    image_size = int(summary["image_size"])
    code = check_recorded_code(cfg.model.name, folder, summary.get("model_code"), trust_code)
    if code:
        logging.getLogger("quicktrain").warning(code)
    model = create_model(cfg.model.name, len(classes), image_size, kwargs=model_keywords(cfg.model))
    state = read_weights(file, file)
    try:
        model.load_state_dict(state)
    except (RuntimeError, KeyError, TypeError, AttributeError) as err:  # not a state dict, or another model's
        detail = " ".join(str(err).split())[:200]
        raise ConfigError(f"weights '{file}' do not match model {cfg.model.name!r}: {detail}") from None
    dev = resolve_device(device)
    inputs = InputPipeline.from_spec(input_spec(summary, cfg), dev)  # the run's record, as trained
    model = model.to(dev, memory_format=inputs.memory_format).eval()  # NCHW where it trained so: ~3x on a CPU
    amp = "auto" if cfg.techniques.amp == "fp16" and dev.type != "cuda" else cfg.techniques.amp
    precision = resolve_precision(amp, dev)
    return LoadedRun(folder, cfg, summary, model, inputs, precision, list(classes), image_size, file)


# ---- evaluate --------------------------------------------------------------------------------
def evaluate_run(
    loaded: LoadedRun,
    dataset: str,
    out: Path,
    max_samples: int | None = None,
    tta: str | None = None,
    tta_fraction: float | None = None,
) -> dict[str, Any]:
    """Test accuracy, macro-F1, top-5, per-class metrics and a confusion-matrix plot of the run's
    model on ``dataset``'s held-out split; written as evaluation.json, evaluation.md, confusion.png.
    ``tta`` and ``tta_fraction`` override the run's test-time augmentation (to weigh a cheaper one);
    the evaluation's time is recorded as ``eval_time_s``."""
    from quicktrain.config import DataConfig
    from quicktrain.data.loader import make_loader
    from quicktrain.data.sources import load_arrays
    from quicktrain.engine.evaluate import evaluate
    from quicktrain.metrics import per_class

    asked = {key: value for key, value in (("run.tta", tta), ("run.tta_fraction", tta_fraction)) if value is not None}
    run = Config.from_overrides(asked, base=loaded.config).run  # checked as any config is
    tta, tta_fraction = run.tta, run.tta_fraction
    spec = loaded.input  # the run's own crop and size, not what this folder would resolve to
    photo = (
        {"crop_pct": spec.crop_pct, "store_size": spec.store_side, "store_format": spec.store_format or "raw"}
        if spec.crop == "resized"
        else {}
    )  # a store as the run's: its format too (runs before store formats kept raw pixels)
    data = DataConfig(
        dataset=dataset, data_dir=loaded.config.data.data_dir, resolution=spec.size, crop=spec.crop,
        max_test_samples=max_samples, max_train_samples=1, cache_dir=loaded.config.data.cache_dir, **photo,
    )  # fmt: skip
    arrays = load_arrays(data, progress=False)
    if arrays.num_classes != len(loaded.classes):
        raise DataError(f"{dataset} has {arrays.num_classes} classes, the run's model {len(loaded.classes)}")
    loader = make_loader(arrays.test, loaded.config.run.eval_batch_size, train=False, seed=0)
    start = time.perf_counter()
    result = evaluate(
        loaded.model, loader, loaded.inputs, loaded.precision, arrays.num_classes, tta=tta, tta_fraction=tta_fraction
    )
    eval_time = time.perf_counter() - start
    report = {
        "run": str(loaded.folder),
        "weights": loaded.weights.name,
        "dataset": dataset,
        "samples": result.samples,
        "test_accuracy": result.accuracy,
        "test_f1_macro": result.f1_macro,
        "test_top5_accuracy": result.top5,
        "test_loss": result.loss,
        "tta": tta,
        "tta_fraction": tta_fraction,
        "eval_time_s": eval_time,
        "per_class": per_class(result.confusion, loaded.classes),
        "confusion_matrix": result.confusion.tolist(),
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "evaluation.json", json.dumps(report, indent=2) + "\n")
    atomic_write_text(out / "evaluation.md", _markdown(report))
    _confusion_png(result.confusion, loaded.classes, out / "confusion.png")
    return report


def _markdown(report: dict[str, Any]) -> str:
    top5 = report["test_top5_accuracy"]
    lines = [
        f"# {report['run']} ({report['weights']}) on {report['dataset']}",
        "",
        f"{report['samples']} images: accuracy {report['test_accuracy']:.4f}, macro-F1 {report['test_f1_macro']:.4f}"
        + (f", top-5 {top5:.4f}" if top5 is not None else ""),
        "",
        "| class | precision | recall | F1 | support |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['class']} | {r['precision']:.4f} | {r['recall']:.4f} | {r['f1']:.4f} | {r['support']} |"
        for r in report["per_class"]
    ]
    return "\n".join(lines) + "\n"


def _confusion_png(cm: torch.Tensor, classes: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(classes)
    fig, ax = plt.subplots(figsize=(max(4, 0.45 * n + 2), max(3.5, 0.45 * n + 1.5)))
    counts = cm.numpy()
    rates = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    image = ax.imshow(rates, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(n), classes if n <= 30 else [], rotation=90, fontsize=7)
    ax.set_yticks(range(n), classes if n <= 30 else [], fontsize=7)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    fig.colorbar(image, ax=ax, label="share of the true class")
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)


# ---- predict ---------------------------------------------------------------------------------
def image_files(paths: list[str | Path]) -> list[Path]:
    from quicktrain.data.decode import list_images

    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += list_images(path)[0]  # the rule training folders follow: hidden files skipped
        elif path.is_file():
            found.append(path)
        else:
            raise DataError(f"'{path}' is neither an image file nor a folder")
    if not found:
        raise DataError(f"no image files under {', '.join(map(str, paths))}")
    return found


@torch.no_grad()
def predict(loaded: LoadedRun, files: list[Path], batch_size: int = 256, progress: bool = True) -> list[dict]:
    """The predicted class and the class probabilities of each image file."""
    from tqdm import tqdm

    rows = []
    for start in tqdm(range(0, len(files), batch_size), desc="predict", unit="batch", disable=not progress):
        chunk = files[start : start + batch_size]
        images = np.stack([loaded.decode(p) for p in chunk])
        x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous().to(loaded.inputs.device)
        with loaded.precision.autocast():
            logits = loaded.model(loaded.inputs(x))
        probs = torch.softmax(logits.float(), dim=1).cpu()
        for path, p in zip(chunk, probs):
            best = int(p.argmax())
            rows.append({"path": str(path), "label": loaded.classes[best], "probability": float(p[best]),
                         **{f"p_{name}": float(v) for name, v in zip(loaded.classes, p)}})  # fmt: skip
    return rows


def write_predictions(rows: list[dict], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())
