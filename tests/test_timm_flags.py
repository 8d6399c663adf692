"""A timm user's command line: each flag of timm's train.py means what it means there, or is refused
with one line naming quicktrain's spelling; no option matches by abbreviation."""

from __future__ import annotations

import argparse

import pytest
from PIL import Image

from quicktrain.cli import build_parser, config_from_args, main
from quicktrain.cli_timm import REFUSED
from quicktrain.config import Config
from quicktrain.data.imagefolder import load_imagefolder


def _config(*argv: str) -> Config:
    return config_from_args(build_parser().parse_args(["train", *argv]))


def _refusal(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(list(argv))
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# timm's spelling -> quicktrain's own spelling of the same setting
MAPPED = [
    (["-b", "64"], ["--batch-size", "64"]),
    (["-j", "3"], ["--workers", "3"]),
    (["--aa", "rand-m9-mstd0.5"], ["--auto-augment", "rand-m9-mstd0.5"]),
    (["--scale", "0.3", "1.0"], ["--crop-scale", "0.3", "1.0"]),
    (["--ratio", "0.8", "1.25"], ["--crop-ratio", "0.8", "1.25"]),
    (["--model-ema"], ["--model-ema", "0.9998"]),
    (["--model-ema", "--model-ema-decay", "0.99"], ["--model-ema", "0.99"]),
    (["--model-ema-decay", "0.99", "--model-ema"], ["--model-ema", "0.99"]),
    (["--amp"], ["--amp", "fp16"]),
    (["--amp", "--amp-dtype", "bfloat16"], ["--amp", "bf16"]),
    (["--amp-dtype", "bfloat16", "--amp"], ["--amp", "bf16"]),
    (["--pretrained", "--model", "timm:test_vit"], ["--pretrained", "hub", "--model", "timm:test_vit"]),
    (["--drop", "0.1"], ["--model-kwargs", "drop_rate=0.1"]),
    (["--drop", "0.1", "--model-kwargs", "qkv_bias=false"], ["--model-kwargs", "drop_rate=0.1", "qkv_bias=false"]),
    (["--torchcompile"], ["--compile"]),
    (["--torchcompile", "inductor"], ["--compile"]),
    (["--experiment", "e1"], ["--out", "runs/e1"]),
    (["--output", "out", "--experiment", "e1"], ["--out", "out/e1"]),
    (["--hflip", "0.5"], ["--flip", "random"]),
    (["--train-split", "train"], []),
    (["--val-split", "validation"], ["--eval-split", "validation"]),
    (["--data-dir", "photos"], ["--dataset", "imagefolder:photos"]),
    (["--dataset", "cifar10", "--data-dir", "d"], ["--dataset", "cifar10", "--data-dir", "d"]),
]


@pytest.mark.parametrize(("timm", "ours"), MAPPED, ids=[" ".join(t) for t, _ in MAPPED])
def test_timm_flags_give_the_config_of_quicktrains_spelling(timm, ours, capsys):
    assert _config(*timm) == _config(*ours)


REFUSED_ARGS = [
    (["--num-classes", "10"], "--classes"),
    (["--min-lr", "1e-5"], "--schedule"),
    (["--warmup-lr", "1e-6"], "--warmup-epochs"),
    (["--color-jitter", "0.4"], "--brightness"),
    (["--interpolation", "bicubic"], "bilinear"),
    (["--log-interval", "50"], "--eval-every-steps"),
    (["--hflip", "0.3"], "--flip"),
    (["--train-split", "trn"], "PATH/train"),
    (["--val-split", "holdout"], "--eval-split"),
    (["--torchcompile", "aot_eager"], "--compile"),
    (["--amp-dtype", "float32"], "bfloat16"),
]


@pytest.mark.parametrize(("argv", "named"), REFUSED_ARGS, ids=[a[0] for a, _ in REFUSED_ARGS])
def test_timm_flags_without_a_meaning_here_are_refused_naming_ours(argv, named, capsys):
    err = _refusal(capsys, "train", *argv)
    assert err.startswith("quicktrain train: error:") and argv[0] in err and named in err, err


def test_every_refused_flag_is_tested():
    assert set(REFUSED) <= {argv[0] for argv, _ in REFUSED_ARGS}


def test_data_dir_with_a_dataset_that_does_not_read_it_is_refused(capsys):
    assert main(["train", "--dataset", "synthetic", "--data-dir", "photos"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--data-dir photos is read by cifar10/cifar100 only" in err and "imagefolder:PATH" in err


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_no_option_matches_by_abbreviation_in_any_command(capsys):
    base = {
        "report": ["DIR"],
        "evaluate": ["RUN", "--dataset", "x"],
        "predict": ["RUN", "x"],
        "export": ["RUN", "--format", "pt2"],
    }
    commands = _subparsers(build_parser())
    assert {"train", "ablate", "report", "tune", "autotune", "evaluate", "predict", "export", "models"} <= set(commands)
    checked = 0
    for name, sub in commands.items():
        assert sub.allow_abbrev is False, name
        longs = {s for a in sub._actions for s in a.option_strings if s.startswith("--") and len(s) > 4}
        for option in sorted(longs):
            prefix = option[:-1]  # one letter short: argparse would have completed it
            if prefix in longs:
                continue
            _, extras = sub.parse_known_args([*base.get(name, []), prefix, "1"])
            assert prefix in extras, (name, prefix)
            checked += 1
    assert checked > 300
    assert "unrecognized arguments: --drop-pat" in _refusal(capsys, "train", "--drop-pat", "0.1")


def test_timms_validation_folder_is_the_held_out_split_and_said(tmp_path):
    for split in ("train", "validation"):
        for c, name in enumerate(("a", "b")):
            (tmp_path / split / name).mkdir(parents=True)
            for i in range(2):
                Image.new("RGB", (8, 8), (100 * c, i, 0)).save(tmp_path / split / name / f"{i}.png")
    arrays = load_imagefolder(tmp_path, progress=False)
    assert len(arrays.test) == 4 and "held-out split: validation/" in arrays.notes
    (tmp_path / "val").mkdir()
    assert "held-out split: validation/" in load_imagefolder(tmp_path, progress=False).notes  # timm's name first
