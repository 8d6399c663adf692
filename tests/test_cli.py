"""The command line: a complete record from the console script, one-line errors for bad input."""

import json
import subprocess
import sys

import pytest
import yaml

from quicktrain.cli import main
from quicktrain.config import Config
from quicktrain.techniques.accumulation import resolve as resolve_accumulation

TINY = [
    "--model",
    "test_resnet",
    "--epochs",
    "1",
    "--max-train-samples",
    "64",
    "--max-test-samples",
    "40",
    "--batch-size",
    "32",
    "--no-progress",
    "--no-tensorboard",
]


@pytest.mark.slow
def test_console_script_trains_on_the_sample_and_prints_a_table(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "quicktrain", "train", *TINY, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "test_accuracy" in proc.stdout and "record:" in proc.stdout
    assert "micro-batch" in proc.stdout and "accumulation" in proc.stdout  # the derived settings
    for name in ("config.yaml", "env.json", "metrics.jsonl", "summary.json", "model.pt"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dataset"] == "sample" and summary["train_samples"] == 64
    assert summary["status"] == "completed"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--lr", "0"], "optim.lr=0.0 must be positive"),
        (["--batch-size", "-4"], "run.batch_size=-4 must be positive"),
        (["--epochs", "0"], "run.epochs=0 must be positive"),
        (["--model", "resnet1000"], "unknown model 'resnet1000'"),
        (["--dataset", "mnist"], "unknown dataset 'mnist'"),
        (["--amp", "fp16"], "fp16 needs a CUDA device"),
        (["--amp", "fp8"], "invalid choice: 'fp8'"),
        (["--accum-steps", "3"], "not divisible by techniques.accum_steps=3"),
        (["--lr", "fast"], "invalid float value: 'fast'"),
        (["optim.lrr=0.1"], "unknown config key 'optim.lrr'"),
        (["optim.lr=abc"], "optim.lr='abc' has the wrong type"),
        (["--dataset", "cifar10", "--data-dir", "/nonexistent"], "pass --download"),
        (["--dataset", "imagefolder:/nonexistent"], "does not exist"),
        (["--config", "/nonexistent.yaml"], "config file '/nonexistent.yaml' does not exist"),
        (["--out", "/proc/quicktrain-run"], "is not writable"),
        (["--pretrained", "/nonexistent.pt"], "does not exist; give a run folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        sys.exit(main(["train", *TINY, *argv]))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()  # nothing half-written


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model: [unclosed\n", "is not valid YAML: expected ',' or ']', but got '<stream end>' at line 2, column 1"),
        ("model: !!python/object/apply:os.system ['true']\n", "uses a YAML tag that quicktrain does not load"),
    ],
)
def test_a_broken_or_unsafe_yaml_preset_is_one_line_and_exit_2(text, message, capsys, tmp_path):
    preset = tmp_path / "bad.yaml"
    preset.write_text(text)
    assert main(["train", "--config", str(preset), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"config file '{preset}'" in err and message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_bare_resume_means_auto():
    from quicktrain.cli import build_parser

    args = build_parser().parse_args(["train", "--out", "r", "--resume"])
    assert vars(args)["run.resume"] == "auto"
    assert vars(build_parser().parse_args(["train", "--resume", "r/checkpoints/c.pt"]))["run.resume"].endswith("c.pt")


@pytest.mark.slow
def test_resume_from_the_command_line_needs_only_the_folder(tmp_path, capsys):
    """An interrupted run (its last checkpoint, summary and weights gone) is continued with
    ``--out DIR --resume auto`` alone, from the run's own config, to the same weights."""
    import torch

    out = tmp_path / "run"
    assert main(["train", *TINY, "--epochs", "2", "--lr", "0.05", "--accum-steps", "2", "--out", str(out)]) == 0
    finished = torch.load(out / "model.pt", weights_only=True)
    newest = sorted((out / "checkpoints").glob("checkpoint-epoch0002-*.pt*"))
    assert len(newest) == 2  # the checkpoint and its checksum
    for path in [*newest, out / "summary.json", out / "model.pt"]:
        path.unlink()
    assert main(["train", "--out", str(out), "--resume", "--no-progress"]) == 0  # bare --resume: auto
    assert "resuming at epoch 2, batch 0" in capsys.readouterr().out
    resumed = torch.load(out / "model.pt", weights_only=True)
    assert all(torch.equal(finished[k], resumed[k]) for k in finished)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["epochs_completed"] == 2 and summary["lr"] == 0.05 and summary["accum_steps"] == 2


def test_table_of_an_empty_history():
    from quicktrain.reporting import format_table

    assert format_table([], ["epoch", "test_accuracy"]).splitlines()[0].split() == ["epoch", "test_accuracy"]


def test_print_config_shows_the_resolved_tree(capsys):
    assert main(["train", "--lr", "0.3", "techniques.accum_steps=4", "--print-config"]) == 0
    cfg = Config.from_dict(yaml.safe_load(capsys.readouterr().out))
    assert cfg.optim.lr == 0.3 and split(cfg) == (32, 4)


def test_flags_override_the_preset(tmp_path, capsys):
    preset = tmp_path / "p.yaml"
    preset.write_text("optim:\n  lr: 0.01\nrun:\n  epochs: 9\n")
    assert main(["train", "--config", str(preset), "--epochs", "2", "--print-config"]) == 0
    cfg = Config.from_dict(yaml.safe_load(capsys.readouterr().out))
    assert (cfg.optim.lr, cfg.run.epochs) == (0.01, 2)


def test_models_lists_the_registry(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "resnet50" in out and "vit_tiny" in out and "efficientnet_b0" in out
    assert "test_resnet" not in out
    assert main(["models", "--all"]) == 0
    assert "test_resnet" in capsys.readouterr().out


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    for flag in (
        "--micro-batch-size",
        "--accum-steps",
        "--amp",
        "--pin-memory",
        "--channels-last",
        "--compile",
        "--target-accuracy",
        "--resume",
        "--max-train-samples",
    ):
        assert flag in out


def _folder(root, classes=("a", "b"), test_classes=None, bad=None):
    """An imagefolder with 2 PNGs per class; ``bad`` = bytes written as one more train 'image'."""
    from PIL import Image

    for split, names in (("train", classes), ("test", test_classes or classes)):
        for name in names:
            (root / split / name).mkdir(parents=True)
            for i in range(2):
                Image.new("RGB", (8, 8), (40 * i, 80, 120)).save(root / split / name / f"{i}.png")
    if bad is not None:
        (root / "train" / classes[0] / "broken.jpg").write_bytes(bad)
    return root


def _jpeg_head():
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (1, 2, 3)).save(buffer, format="JPEG")
    return buffer.getvalue()[:60]  # truncated inside the header


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root.mkdir() or root, "is not a folder"),  # empty data dir
        (lambda root: _folder(root, test_classes=("a", "c")), "class folders differ"),
        (lambda root: _folder(root, bad=_jpeg_head()), "cannot decode image"),  # truncated
        (lambda root: _folder(root, bad=b"plain text, not an image"), "cannot decode image"),
    ],
    ids=["empty", "classes-differ", "truncated", "not-an-image"],
)
def test_bad_data_folders_are_one_line_and_exit_2(make, message, capsys, tmp_path):
    data = make(tmp_path / "data")
    out = tmp_path / "run"
    code = main(["train", "--dataset", f"imagefolder:{data}", "--resolution", "8", "--model", "test_vit",
                 "--out", str(out), "--no-progress"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not out.exists()  # the data is checked before the run folder is made


def test_resume_with_another_model_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--out", str(out)]) == 0
    capsys.readouterr()
    before = sorted(p.name for p in out.rglob("*"))
    assert main(["train", *TINY, "--out", str(out), "--resume", "auto", "--model", "test_vit"]) == 2
    err = capsys.readouterr().err.strip()
    assert "model.name was 'test_resnet' there, now 'test_vit'" in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in out.rglob("*")) == before  # the record is untouched


def split(cfg) -> tuple[int, int]:
    """(micro-batch size, accumulation steps) the accumulation technique derives from ``cfg``."""
    return resolve_accumulation(cfg).split


def test_timm_train_flags_are_accepted_beside_ours(capsys):
    from quicktrain.cli import build_parser, config_from_args

    argv = ["train", "--opt", "adamw", "--sched", "cosine", "--smoothing", "0.1", "--clip-grad", "1.5",
            "--grad-accum-steps", "2", "--img-size", "64", "--output", "r", "--model-ema-decay", "0.99",
            "--drop-path", "0.1", "--mixup", "0.8", "--cutmix", "1.0"]  # fmt: skip
    cfg = config_from_args(build_parser().parse_args(argv))
    assert (cfg.optim.optimizer, cfg.optim.schedule, cfg.optim.label_smoothing, cfg.optim.grad_clip) == (
        "adamw", "cosine", 0.1, 1.5)  # fmt: skip
    assert (cfg.techniques.accum_steps, cfg.model.image_size, cfg.run.out, cfg.optim.model_ema) == (2, 64, "r", 0.99)
    assert (cfg.model.drop_path, cfg.data.mixup, cfg.data.cutmix) == (0.1, 0.8, 1.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    shown = capsys.readouterr().out
    assert "--optimizer OPTIMIZER, --opt OPTIMIZER" in shown and "--out OUT, --output OUT" in shown
