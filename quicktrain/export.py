"""Export a trained run's model (ONNX, pt2, TorchScript, safetensors), loaded back and checked
against the PyTorch model, with the preprocessing a serving program needs beside it.

Example:
    >>> from quicktrain.inference import load_run  # doctest: +SKIP
    >>> export(load_run("runs/my-run"), "onnx", Path("model.onnx"))["max_abs_error"] < 1e-4  # doctest: +SKIP
    True
"""

from __future__ import annotations

import inspect
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from quicktrain.atomic import atomic_write, atomic_write_text
from quicktrain.config import model_keywords
from quicktrain.errors import ConfigError
from quicktrain.inference import LoadedRun

EXPORT_FORMATS = ("onnx", "pt2", "torchscript", "safetensors")
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
    """What a serving program must do to an image before the exported graph sees it: the run's
    input record (:class:`~quicktrain.data.input_spec.InputSpec`), with the model, its classes, the
    crop in words and what the graph takes."""
    spec = loaded.input
    info: dict[str, Any] = {
        "model": loaded.config.model.name,
        "classes": loaded.classes,
        "decode_size": spec.size,  # images are decoded (resized, or centre-cropped: crop) to this first
        **spec.to_record(),
        "crop": spec.describe_crop(),
        "crop_kind": spec.crop,
    }
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
        spec = loaded.input
        model = _Uint8Input(model, spec.mean, spec.std, spec.model_resize).eval()  # as the run's InputPipeline
        side = spec.size
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
