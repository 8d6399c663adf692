"""After training: evaluate, predict and export a run's model."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tiny_config
from PIL import Image

from quicktrain.cli import main
from quicktrain.engine import train
from quicktrain.errors import ConfigError
from quicktrain.export import export
from quicktrain.inference import evaluate_run, load_run, predict


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny trained run on an image folder (so predict has files to read)."""
    root = tmp_path_factory.mktemp("inference")
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for k, name in enumerate(("red", "green", "blue")):
            folder = root / "ds" / split / name
            folder.mkdir(parents=True)
            for i in range(12 if split == "train" else 6):
                img = rng.integers(0, 90, size=(16, 16, 3), dtype=np.uint8)
                img[..., k] += 150
                Image.fromarray(img).save(folder / f"{i}.png")
    overrides = {"data.dataset": f"imagefolder:{root / 'ds'}", "data.resolution": 16, "model.name": "test_resnet"}
    overrides.update({"data.max_train_samples": None, "data.max_test_samples": None, "run.epochs": 3})
    overrides.update({"run.batch_size": 12, "data.val_fraction": 0.25, "techniques.amp": "auto"})
    train(tiny_config(root / "run", **overrides))
    return root


def test_evaluate_reproduces_the_runs_own_test_accuracy_exactly(run_folder, capsys):
    summary = json.loads((run_folder / "run" / "summary.json").read_text())
    argv = ["evaluate", str(run_folder / "run"), "--dataset", f"imagefolder:{run_folder / 'ds'}"]
    assert main(argv) == 0
    out = run_folder / "run" / "evaluation-ds"
    report = json.loads((out / "evaluation.json").read_text())
    assert report["test_accuracy"] == summary["test_accuracy"] and report["samples"] == 18
    assert report["test_f1_macro"] == pytest.approx(summary["test_f1_macro"])
    assert [r["class"] for r in report["per_class"]] == ["blue", "green", "red"]
    assert (out / "confusion.png").stat().st_size > 0 and "| red |" in (out / "evaluation.md").read_text()
    assert "accuracy" in capsys.readouterr().out


@pytest.mark.parametrize("channels_last", [True, False])
def test_a_loaded_run_keeps_its_training_memory_format(tmp_path, channels_last):
    cfg = tiny_config(tmp_path, **{"model.name": "test_resnet", "techniques.channels_last": channels_last})
    train(cfg)
    loaded = load_run(tmp_path)
    kernels = [p for p in loaded.model.parameters() if p.dim() == 4 and p.shape[1] > 1 and p.shape[-1] > 1]
    tensors = [*kernels, loaded.inputs(torch.zeros(2, 3, 32, 32))]  # the weights and a batch: one layout
    assert kernels and all(t.is_contiguous(memory_format=torch.channels_last) == channels_last for t in tensors)
    assert all(t.is_contiguous() != channels_last for t in tensors)


def test_evaluate_with_another_tta_averages_the_mirrored_logits(run_folder, tmp_path):
    """The run trained without TTA; --tta flip scores the mean logits of each image and its mirror."""
    files = sorted((run_folder / "ds" / "test").rglob("*.png"))
    loaded = load_run(run_folder / "run")
    assert loaded.config.run.tta == "off"
    images = np.stack([np.asarray(Image.open(p).convert("RGB")) for p in files])
    x = loaded.inputs(torch.from_numpy(images).permute(0, 3, 1, 2).contiguous())
    labels = torch.tensor([loaded.classes.index(p.parent.name) for p in files])
    with torch.no_grad(), loaded.precision.autocast():
        logits = (loaded.model(x).float() + loaded.model(x.flip(-1)).float()) / 2
    argv = ["evaluate", str(run_folder / "run"), "--dataset", f"imagefolder:{run_folder / 'ds'}"]
    assert main([*argv, "--tta", "flip", "--out", str(tmp_path / "flip")]) == 0
    report = json.loads((tmp_path / "flip" / "evaluation.json").read_text())
    assert report["tta"] == "flip" and report["eval_time_s"] > 0
    assert report["test_accuracy"] == pytest.approx((logits.argmax(1) == labels).float().mean().item())
    with pytest.raises(SystemExit) as bad:
        main([*argv, "--tta", "sideways"])
    assert bad.value.code == 2
    with pytest.raises(ConfigError, match="sideways"):  # the API checks it too, where the views are chosen
        evaluate_run(loaded, f"imagefolder:{run_folder / 'ds'}", tmp_path / "bad", tta="sideways")


def test_predict_labels_are_the_models_argmax(run_folder, tmp_path):
    files = sorted((run_folder / "ds" / "test").rglob("*.png"))
    out = tmp_path / "p.csv"
    assert (
        main(["predict", str(run_folder / "run"), str(run_folder / "ds" / "test"), "--out", str(out), "--no-progress"])
        == 0
    )
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert [Path(r["path"]) for r in rows] == files
    loaded = load_run(run_folder / "run")
    images = np.stack([np.asarray(Image.open(p).convert("RGB")) for p in files])
    x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()
    with torch.no_grad(), loaded.precision.autocast():
        expected = loaded.model(loaded.inputs(x)).argmax(1)
    assert [r["label"] for r in rows] == [loaded.classes[int(i)] for i in expected]
    assert all(abs(sum(float(r[f"p_{c}"]) for c in loaded.classes) - 1) < 1e-4 for r in rows)
    assert predict(loaded, files[:2], batch_size=1, progress=False)[0]["label"] == rows[0]["label"]


def _run_export(fmt: str, path: Path, x: torch.Tensor) -> torch.Tensor:
    """Load an exported file the way its users would, without quicktrain, and run it on ``x``."""
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return torch.from_numpy(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0])
    if fmt == "pt2":
        return torch.export.load(str(path)).module()(x)
    if fmt == "torchscript":
        return torch.jit.load(str(path))(x)
    from safetensors.torch import load_file

    from quicktrain.models import create_model

    model = create_model("test_resnet", 3, 16).eval()
    model.load_state_dict(load_file(str(path)))
    return model(x)


@pytest.mark.parametrize("fmt", ["onnx", "pt2", "torchscript", "safetensors"])
def test_exports_load_back_and_match_the_model_at_two_batch_sizes(run_folder, tmp_path, fmt):
    loaded = load_run(run_folder / "run", weights="best.pt", device="cpu")
    checked = export(loaded, fmt, tmp_path / f"m.{fmt}")
    path = Path(checked["file"])
    model = loaded.model.float().eval()
    for batch in (1, 5):  # neither is the batch export() traced with (4): the batch axis is dynamic
        x = torch.rand(batch, 3, 16, 16, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            assert torch.allclose(_run_export(fmt, path, x), model(x), atol=1e-4, rtol=1e-4)
    sidecar = json.loads(Path(checked["preprocessing"]).read_text())
    assert sidecar["classes"] == ["blue", "green", "red"] and sidecar["image_size"] == 16
    assert sidecar["mean"] == pytest.approx(loaded.inputs.mean) and sidecar["channel_order"] == "RGB"


def test_an_onnx_file_is_self_contained_and_carries_its_preprocessing(run_folder, tmp_path):
    """Copied alone to another folder, the file loads, and its metadata is enough to reproduce the
    PyTorch model's outputs from raw images."""
    import shutil

    import onnx
    import onnxruntime

    loaded = load_run(run_folder / "run", device="cpu")
    export(loaded, "onnx", tmp_path / "made" / "model.onnx")
    assert sorted(p.name for p in (tmp_path / "made").iterdir()) == ["model.onnx", "model.onnx.json"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(tmp_path / "made" / "model.onnx", elsewhere / "model.onnx")
    meta = {p.key: p.value for p in onnx.load(str(elsewhere / "model.onnx")).metadata_props}
    mean, std = np.array(json.loads(meta["mean"])), np.array(json.loads(meta["std"]))
    files = sorted((run_folder / "ds" / "test").rglob("*.png"))[:5]
    raw = np.stack([np.asarray(Image.open(p).convert("RGB")) for p in files]).astype(np.float32)
    x = ((raw / 255 - mean) / std).transpose(0, 3, 1, 2).astype(np.float32)  # the metadata's recipe
    session = onnxruntime.InferenceSession(str(elsewhere / "model.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    images = torch.from_numpy(raw.astype(np.uint8)).permute(0, 3, 1, 2).contiguous()
    with torch.no_grad():
        expected = loaded.model.float()(loaded.inputs(images)).numpy()
    assert np.allclose(got, expected, atol=1e-4)
    assert json.loads(meta["classes"]) == ["blue", "green", "red"]


def test_a_uint8_input_export_gives_the_labels_predict_gives(run_folder, tmp_path):
    import onnxruntime

    loaded = load_run(run_folder / "run", device="cpu")
    export(loaded, "onnx", tmp_path / "u8.onnx", uint8_input=True)
    files = sorted((run_folder / "ds" / "test").rglob("*.png"))
    images = np.stack([np.asarray(Image.open(p).convert("RGB")) for p in files])  # (N, H, W, 3) uint8
    session = onnxruntime.InferenceSession(str(tmp_path / "u8.onnx"), providers=["CPUExecutionProvider"])
    labels = session.run(None, {session.get_inputs()[0].name: images})[0].argmax(1)
    predicted = [r["label"] for r in predict(loaded, files, progress=False)]
    assert [loaded.classes[i] for i in labels] == predicted


def test_exports_follow_the_umask(run_folder, tmp_path):
    import os

    old = os.umask(0o022)
    try:
        loaded = load_run(run_folder / "run", device="cpu")
        for fmt in ("onnx", "safetensors"):
            checked = export(loaded, fmt, tmp_path / f"m.{fmt}")
            for path in (Path(checked["file"]), Path(checked["preprocessing"])):
                assert path.stat().st_mode & 0o777 == 0o644, path
    finally:
        os.umask(old)


def test_evaluate_and_predict_default_to_the_device_train_would_pick(monkeypatch):
    from quicktrain.cli import build_parser

    parser = build_parser()
    for argv in (["evaluate", "r", "--dataset", "sample"], ["predict", "r", "x.png"]):
        assert parser.parse_args(argv).device == "auto"
    from quicktrain.engine.setup import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto").type == "cuda"  # what load_run(device="auto") resolves through


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["export", "{run}", "--format", "tflite"],
            "unknown export format 'tflite'; accepted: onnx, pt2, torchscript, safetensors",
        ),
        (["predict", "{run}", "{empty}"], "no image files under"),
        (["evaluate", "{empty}", "--dataset", "sample"], "does not exist; give a run folder"),
        (["evaluate", "{run}/bad.pt", "--dataset", "sample"], "do not match model 'test_resnet'"),
        (["evaluate", "{run}", "--dataset", "sample", "--tta-fraction", "0"], "run.tta_fraction=0.0 must be in (0, 1]"),
    ],
)
def test_bad_input_is_one_line_exit_2(run_folder, tmp_path, capsys, argv, message):
    empty = tmp_path / "empty"
    empty.mkdir()
    torch.save({"nothing": torch.zeros(1)}, run_folder / "run" / "bad.pt")
    filled = [a.format(run=run_folder / "run", empty=empty) for a in argv]
    assert main(filled) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_a_run_trained_in_fp16_is_evaluated_on_a_cpu(run_folder, tmp_path):
    """fp16 autocast is CUDA-only: on a CPU the loaded run takes the best native precision instead of
    refusing (its record says fp16 as a GPU run's would; the weights are fp32 either way)."""
    import shutil

    import yaml

    copy = tmp_path / "fp16-run"
    shutil.copytree(run_folder / "run", copy, ignore=shutil.ignore_patterns("checkpoints", "evaluation-*"))
    cfg = yaml.safe_load((copy / "config.yaml").read_text())
    cfg["techniques"]["amp"] = "fp16"
    (copy / "config.yaml").write_text(yaml.safe_dump(cfg))
    loaded = load_run(copy, device="cpu")
    assert loaded.precision.mode in ("bf16", "off")
    report = evaluate_run(loaded, f"imagefolder:{run_folder / 'ds'}", tmp_path / "eval")
    assert report["samples"] == 18
