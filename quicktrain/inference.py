"""After training: load a run's model as it was trained, evaluate it on any dataset, predict
labels for image files, export it.

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
import inspect
import io
import json
import logging
import math
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from quicktrain.atomic import atomic_write, atomic_write_text
from quicktrain.config import Config, model_keywords
from quicktrain.errors import ConfigError, DataError
from quicktrain.weights_file import read_weights

EXPORT_FORMATS = ("onnx", "pt2", "torchscript", "safetensors")


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

    @property
    def input(self) -> dict[str, Any]:
        """How the run turned image files into inputs (its summary's ``input``): crop pad (a square
        decode at ``size``) or resized (photos: resize the shorter side, centre crop ``size``)."""
        recorded = self.summary.get("input")
        if recorded:
            return recorded
        return {"crop": "pad", "size": self.config.data.resolution or self.image_size}  # runs before photos

    def decode(self, path: Path) -> np.ndarray:
        """One image file as the run's evaluation saw it: (size, size, 3) uint8."""
        spec = self.input
        if spec["crop"] == "resized":
            from quicktrain.data.photo_store import eval_crop

            return eval_crop(path, spec["store_side"], spec["size"], spec["crop_pct"])
        from quicktrain.data.decode import decode_image

        return decode_image(path, spec["size"])


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
    from quicktrain.techniques import memory_format
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
    layout = memory_format(cfg.techniques.channels_last)  # as trained: NCHW costs ~3x on a CPU
    model = model.to(dev, memory_format=layout).eval()
    norm = summary.get("normalization") or {}
    extra = {"mean": tuple(norm["mean"]), "std": tuple(norm["std"])} if norm else {}
    inputs = InputPipeline(dev, image_size=cfg.model.image_size, memory_format=layout, **extra)
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
    photo = {"crop_pct": spec["crop_pct"], "store_size": spec["store_side"]} if spec["crop"] == "resized" else {}
    data = DataConfig(
        dataset=dataset, data_dir=loaded.config.data.data_dir, resolution=spec["size"], crop=spec["crop"],
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


# ---- export ----------------------------------------------------------------------------------
EXPORT_SUFFIXES = {
    "onnx": "model.onnx",
    "pt2": "model.pt2",
    "torchscript": "model.torchscript.pt",
    "safetensors": "model.safetensors",
}
ONNX_EXTERNAL_DATA_BYTES = 2**31  # protobuf's limit: only weights past 2 GB go to a .data file beside


class _Uint8Input(nn.Module):
    """The model with the run's preprocessing baked in: (N, H, W, 3) uint8 RGB in, logits out.
    The same arithmetic as the training's :class:`~quicktrain.data.prepare.InputPipeline`."""

    def __init__(self, model: nn.Module, mean: tuple[float, ...], std: tuple[float, ...], size: int | None) -> None:
        super().__init__()
        self.model, self.size = model, size
        std_t = torch.tensor(std).view(1, -1, 1, 1)
        self.register_buffer("scale", 1.0 / (255.0 * std_t))
        self.register_buffer("shift", -torch.tensor(mean).view(1, -1, 1, 1) / std_t)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.permute(0, 3, 1, 2).float()  # (N, H, W, 3) uint8 -> (N, 3, H, W) float, 0..255
        x = torch.addcmul(self.shift, x, self.scale)
        if self.size is not None:  # the run resized on the device too (model.image_size)
            x = torch.nn.functional.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return self.model(x)


def preprocessing(loaded: LoadedRun, uint8_input: bool = False) -> dict[str, Any]:
    """What a serving program must do to an image before the exported graph sees it."""
    norm = loaded.summary.get("normalization") or {}
    mean, std = loaded.inputs.mean, loaded.inputs.std
    info: dict[str, Any] = {
        "model": loaded.config.model.name,
        "classes": loaded.classes,
        "decode_size": loaded.input["size"],  # images are decoded (resized, or centre-cropped: crop) to this first
        "image_size": loaded.config.model.image_size or loaded.image_size,
        "channel_order": "RGB",
        "mean": list(mean),
        "std": list(std),
        "normalization_source": norm.get("source"),
    }
    if loaded.input["crop"] == "resized":
        info["crop"] = (
            f"resize the shorter side to {math.floor(loaded.input['size'] / loaded.input['crop_pct'])} px "
            f"(bilinear, antialiased), keep the centre {loaded.input['size']} x {loaded.input['size']}"
        )
    else:
        info["crop"] = f"resize the whole image to {loaded.input['size']} x {loaded.input['size']} (bilinear)"
    if uint8_input:
        info["input"] = "uint8 (N, H, W, 3) RGB at decode_size; normalisation and resizing are inside the graph"
    else:
        info["input"] = "float32 (N, 3, image_size, image_size): RGB / 255, minus mean, divided by std (per channel)"
    return info


def export(loaded: LoadedRun, fmt: str, out: Path, check_inputs: int = 4, uint8_input: bool = False) -> dict[str, Any]:
    """Write the model as ``fmt`` (with ``uint8_input``: taking uint8 NHWC images, preprocessing
    inside), load the export back and compare its outputs with the PyTorch model's on
    ``check_inputs`` random inputs; the preprocessing is written beside it as JSON (and, for ONNX,
    into the file's metadata). Returns what was checked."""
    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; accepted: {', '.join(EXPORT_FORMATS)}")
    if uint8_input and fmt == "safetensors":
        raise ConfigError("--uint8-input bakes preprocessing into a graph; safetensors holds weights only")
    info = preprocessing(loaded, uint8_input)
    model = loaded.model.float().eval().cpu()  # exports are built and checked on the CPU
    g = torch.Generator().manual_seed(0)
    if uint8_input:
        model = _Uint8Input(model, tuple(info["mean"]), tuple(info["std"]), loaded.config.model.image_size).eval()
        side = loaded.input["size"]
        x = torch.randint(0, 256, (check_inputs, side, side, 3), generator=g, dtype=torch.uint8)
    else:
        size = info["image_size"]
        x = torch.rand(check_inputs, 3, size, size, generator=g)
    with torch.no_grad():
        expected = model(x)
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "onnx":
        got = _onnx(model, x, out, info)
    elif fmt == "pt2":
        got = _pt2(model, x, out)
    elif fmt == "torchscript":
        with warnings.catch_warnings():  # torch.jit is deprecated in favour of pt2; kept for old runtimes
            warnings.simplefilter("ignore", FutureWarning)
            scripted = torch.jit.trace(model, x[:1])
            atomic_write(out, lambda f: torch.jit.save(scripted, f))
            with torch.no_grad():
                got = torch.jit.load(str(out))(x)
    else:
        from safetensors.torch import load, save

        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        atomic_write(out, lambda f: f.write(save(state, metadata={"quicktrain": json.dumps(info)})))
        from quicktrain.models import create_model

        # a fresh model from the registry, given the exported tensors
        keywords = model_keywords(loaded.config.model)
        rebuilt = create_model(loaded.config.model.name, len(loaded.classes), loaded.image_size, kwargs=keywords).eval()
        rebuilt.load_state_dict(load(out.read_bytes()))
        with torch.no_grad():
            got = rebuilt(x)
    error = float((got - expected).abs().max())
    if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
        raise ConfigError(f"the {fmt} export of {loaded.folder} differs from the model (max error {error:.2e})")
    sidecar = out.with_name(out.name + ".json")
    atomic_write_text(sidecar, json.dumps({"format": fmt, "file": out.name, **info}, indent=2) + "\n")
    return {"format": fmt, "file": str(out), "preprocessing": str(sidecar), "inputs_checked": check_inputs,
            "max_abs_error": error}  # fmt: skip


def _dynamic_batch(model: nn.Module) -> dict[str, Any]:
    name = next(iter(inspect.signature(model.forward).parameters))  # the input's name, for its dynamic batch
    return {name: {0: torch.export.Dim("batch")}}


def _pt2(model: nn.Module, x: torch.Tensor, out: Path) -> torch.Tensor:
    """torch.export: the program with a dynamic batch dimension, loaded back and run."""
    program = torch.export.export(model, (x,), dynamic_shapes=_dynamic_batch(model))
    atomic_write(out, lambda f: torch.export.save(program, f))
    with torch.no_grad():
        return torch.export.load(str(out)).module()(x)


def _onnx(model: nn.Module, x: torch.Tensor, out: Path, info: dict[str, Any]) -> torch.Tensor:
    """One self-contained file (weights inside, below 2 GB) with a dynamic batch dimension and the
    preprocessing in its metadata; run in onnxruntime on ``x``."""
    try:
        import onnx
        import onnxruntime
    except ImportError:
        raise ConfigError(
            "--format onnx needs onnx, onnxscript and onnxruntime: pip install 'quicktrain[export]'"
        ) from None
    size = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    external = size >= ONNX_EXTERNAL_DATA_BYTES
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        staged = Path(tmp) / out.name  # the final name, so an external .data file is named after it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's progress notes
            torch.onnx.export(model, (x,), str(staged), dynamo=True, external_data=external,
                              dynamic_shapes=_dynamic_batch(model))  # fmt: skip
        proto = onnx.load(str(staged), load_external_data=False)
        for key, value in info.items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = key, value if isinstance(value, str) else json.dumps(value)
        onnx.save(proto, str(staged))
        for extra in sorted(Path(tmp).iterdir()):  # the .data file first, the model that names it last
            if extra != staged:
                _publish(extra, out.parent / extra.name)
        _publish(staged, out)
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    return torch.from_numpy(result)


def _publish(staged: Path, target: Path) -> None:
    """Move a finished file into place with the permissions an ordinary open() would give it."""
    atomic_write(target, lambda f: f.write(staged.read_bytes()))
