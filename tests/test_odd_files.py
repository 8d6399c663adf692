"""Photo folders and run folders from someone else: every odd file gets one clear line, and no
code from a received folder runs uninvited."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from quicktrain.cli import main
from quicktrain.config import DataConfig
from quicktrain.data.decode import PIXEL_LIMIT_ENV, decode_image, list_images
from quicktrain.data.imagefolder import list_split
from quicktrain.data.photo_store import decode_photo
from quicktrain.data.sources import load_arrays
from quicktrain.errors import DataError

TINY = ["--model", "test_resnet", "--epochs", "1", "--batch-size", "8", "--amp", "off", "--no-tensorboard"]
TINY += ["--no-progress"]


def _png(width: int, height: int, depth: int = 8, colour: int = 2, rows: bytes | None = None) -> bytes:
    """A PNG written chunk by chunk, so it may declare any size (a decompression bomb) or depth."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    body = chunk(b"IDAT", zlib.compress(rows)) if rows is not None else b""
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + body + chunk(b"IEND", b"")


def _bomb(path: Path) -> Path:
    path.write_bytes(_png(30000, 30000))  # a header declaring 900 million pixels
    return path


def _folder(root: Path, classes=("a", "b"), per_class: int = 4, size: int = 8) -> Path:
    for split, n in (("train", per_class), ("test", 2)):
        for c, name in enumerate(classes):
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                Image.new("RGB", (size, size), (120 * c, 30 * i, 90)).save(root / split / name / f"{i}.png")
    return root


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "\x1b" not in err, err
    assert err.startswith("quicktrain ") and len(err) <= 400, err
    return err


# ---- what a class folder may hold ------------------------------------------------------------
def test_images_in_subfolders_count_and_hidden_files_do_not(tmp_path):
    root = _folder(tmp_path / "data")
    year = root / "train" / "a" / "2023" / "summer"
    year.mkdir(parents=True)
    for i in range(3):
        Image.new("RGB", (8, 8), (i, 2, 3)).save(year / f"deep{i}.JPG")  # upper-case extension too
    (root / "train" / "a" / "._0.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble")  # macOS metadata
    (root / "train" / "a" / ".DS_Store").write_bytes(b"Bud1")
    hidden = root / "train" / "a" / ".ipynb_checkpoints"
    hidden.mkdir()
    Image.new("RGB", (8, 8)).save(hidden / "copy.png")
    (root / "train" / ".ipynb_checkpoints").mkdir()  # not a class
    listing = list_split(root, "train")
    assert listing.classes == ["a", "b"] and listing.nested == 3
    assert len(listing.paths) == 11 and sum(listing.labels == 0) == 7
    assert not any(p.name.startswith(".") or ".ipynb_checkpoints" in p.parts for p in listing.paths)
    arrays = load_arrays(DataConfig(dataset=f"imagefolder:{root}"), progress=False)
    assert arrays.notes == ("held-out split: test/", "3 of 11 training images from subfolders of their class folders")


def test_the_banner_says_how_many_images_came_from_subfolders(tmp_path, capsys):
    root = _folder(tmp_path / "data")
    (root / "train" / "b" / "more").mkdir()
    for i in range(2):
        Image.new("RGB", (8, 8), (i, 0, 0)).save(root / "train" / "b" / "more" / f"x{i}.png")
    assert main(["train", "--dataset", f"imagefolder:{root}", *TINY, "--out", str(tmp_path / "run")]) == 0
    assert "2 of 10 training images from subfolders" in capsys.readouterr().out
    record = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert "2 of 10 training images from subfolders of their class folders" in record["input"]["notes"]


def test_predict_lists_files_as_training_does(tmp_path):
    from quicktrain.inference import image_files

    root = _folder(tmp_path / "data")
    (root / "test" / "a" / "._0.png").write_bytes(b"\x00\x05\x16\x07")
    assert len(image_files([root / "test"])) == 4 == len(list_images(root / "test")[0])


def test_an_empty_class_folder_is_refused_naming_it(tmp_path, capsys):
    root = _folder(tmp_path / "data")
    (root / "train" / "bird").mkdir()
    (root / "train" / "bird" / "notes.txt").write_text("no images here")
    (root / "test" / "bird").mkdir()
    out = tmp_path / "run"
    assert main(["train", "--dataset", f"imagefolder:{root}", *TINY, "--out", str(out)]) == 2
    err = _one_line_error(capsys)
    assert f"'{root / 'train' / 'bird'}'" in err and "--classes" in err
    assert not out.exists()


def test_naming_the_classes_leaves_an_empty_folder_out(tmp_path, capsys):
    root = _folder(tmp_path / "data")
    (root / "train" / "bird").mkdir()
    (root / "test" / "bird").mkdir()
    out = tmp_path / "run"
    assert main(["train", "--dataset", f"imagefolder:{root}", "--classes", "a", "b", *TINY, "--out", str(out)]) == 0
    assert json.loads((out / "summary.json").read_text())["classes"] == ["a", "b"]
    capsys.readouterr()
    assert main(["train", "--dataset", f"imagefolder:{root}", "--classes", "a", "cat", *TINY]) == 2
    assert "data.classes names cat" in _one_line_error(capsys)


# ---- files that are not what they say ----------------------------------------------------------
def test_a_decompression_bomb_is_one_line_naming_the_file_and_the_limit(tmp_path):
    bomb = _bomb(tmp_path / "bomb.png")
    assert bomb.stat().st_size < 100  # a header only
    for decode in (lambda: decode_image(bomb, 8), lambda: decode_photo(bomb, 64)):
        with pytest.raises(DataError, match="declares more than 178,956,970 pixels") as caught:
            decode()
        assert str(bomb) in str(caught.value) and "--max-image-pixels" in str(caught.value)


def test_raising_the_pixel_limit_lets_a_large_image_through(tmp_path, monkeypatch):
    monkeypatch.setenv(PIXEL_LIMIT_ENV, "")  # restored after the test, whatever the run sets
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)
    rows = b"".join(b"\x00" + bytes(3 * 40) for _ in range(30))
    wide = tmp_path / "wide.png"
    wide.write_bytes(_png(40, 30, rows=rows))  # 1,200 pixels
    root = _folder(tmp_path / "data")
    (root / "train" / "a" / "wide.png").write_bytes(wide.read_bytes())
    with pytest.raises(DataError, match="more than 1,000 pixels"):
        load_arrays(DataConfig(dataset=f"imagefolder:{root}", max_image_pixels=1000), progress=False)
    arrays = load_arrays(DataConfig(dataset=f"imagefolder:{root}", max_image_pixels=2000), progress=False)
    assert len(arrays.train) == 9


def test_a_bomb_in_a_training_folder_or_given_to_predict_is_one_line(tmp_path, capsys):
    root = _folder(tmp_path / "data")
    run = tmp_path / "run"
    assert main(["train", "--dataset", f"imagefolder:{root}", *TINY, "--out", str(run)]) == 0
    _bomb(root / "train" / "a" / "bomb.png")
    capsys.readouterr()
    assert main(["train", "--dataset", f"imagefolder:{root}", *TINY, "--out", str(tmp_path / "r2")]) == 2
    assert "bomb.png' declares more than" in _one_line_error(capsys)
    bomb = str(root / "train" / "a" / "bomb.png")
    assert main(["predict", str(run), bomb, "--out", str(tmp_path / "p.csv"), "--no-progress"]) == 2
    assert "bomb.png' declares more than" in _one_line_error(capsys)
    assert not (tmp_path / "p.csv").exists()


def test_an_error_in_a_loader_worker_is_the_files_own_one_line(tmp_path, capsys):
    root = _folder(tmp_path / "data")
    good = io.BytesIO()
    Image.new("RGB", (8, 8)).save(good, format="JPEG")
    (root / "test" / "b" / "broken.jpg").write_bytes(good.getvalue()[:60])  # truncated in its header
    args = ["--data-mode", "stream", "--workers", "2", "--out", str(tmp_path / "run")]
    assert main(["train", "--dataset", f"imagefolder:{root}", *TINY, *args]) == 2
    err = _one_line_error(capsys)
    assert "cannot decode image" in err and "broken.jpg" in err and "worker" not in err
    record = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert record["status"] == "failed" and "broken.jpg" in record["error"]


def test_16_bit_greyscale_is_scaled_to_8_bits_not_clipped_white(tmp_path):
    gradient = np.linspace(0, 65535, 64 * 64).reshape(64, 64).astype(np.uint16)
    path = tmp_path / "deep.png"
    Image.fromarray(gradient).save(path)
    with Image.open(path) as img:
        assert img.mode == "I;16"  # what Pillow opens; its convert("RGB") would clip at 255
    decoded = decode_image(path, 64)
    np.testing.assert_array_equal(decoded[..., 0], (gradient >> 8).astype(np.uint8))
    assert (decoded == 255).mean() < 0.01 and decoded.std() > 60
    np.testing.assert_array_equal(decode_photo(path, 64)[0], decoded)


# ---- run folders and weights from someone else -----------------------------------------------------
@pytest.fixture
def trained(tmp_path) -> Path:
    run = tmp_path / "run"
    assert main(["train", "--dataset", "synthetic", "--max-train-samples", "32", "--max-test-samples", "8",
                 *TINY, "--out", str(run)]) == 0  # fmt: skip
    return run


def _foreign_pickle(path: Path) -> Path:
    torch.save({"model": argparse.Namespace(lr=1)}, path)  # an object outside the weights-only allowlist
    return path


@pytest.mark.parametrize("command", ["evaluate", "predict", "export"])
def test_a_file_torch_refuses_to_load_is_one_short_line_for_inference(trained, tmp_path, capsys, command):
    _foreign_pickle(trained / "foreign.pt")
    extra = {"evaluate": ["--dataset", "synthetic"], "predict": [str(trained)], "export": ["--format", "pt2"]}
    capsys.readouterr()
    assert main([command, str(trained), "--weights", "foreign.pt", *extra[command]]) == 2
    err = _one_line_error(capsys)
    assert "foreign.pt' is not a quicktrain checkpoint or holds objects quicktrain does not load" in err
    assert "weights_only" not in err and len(err) < 300


def test_a_file_torch_refuses_to_load_is_one_short_line_for_resume_and_pretrained(tmp_path, capsys):
    bad = _foreign_pickle(tmp_path / "foreign.pt")
    data = ["--dataset", "synthetic", "--max-train-samples", "16", "--max-test-samples", "8"]
    for flags in (["--resume", str(bad)], ["--pretrained", str(bad)]):
        assert main(["train", *data, *TINY, *flags, "--out", str(tmp_path / "r")]) == 2
        err = _one_line_error(capsys)
        assert "holds objects quicktrain does not load" in err and "weights_only" not in err
    (tmp_path / "text.pt").write_text("not a checkpoint")
    assert main(["train", *data, *TINY, "--pretrained", str(tmp_path / "text.pt")]) == 2
    assert "text.pt' is not a quicktrain checkpoint" in _one_line_error(capsys)


FACTORY = """
from pathlib import Path
from torch import nn

Path(__file__).with_suffix(".ran").write_text("imported")  # shows whether the file was run


def make(num_classes, image_size):
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, num_classes))
"""


def _train_with_factory(tmp_path: Path) -> tuple[Path, Path]:
    code = tmp_path / "nets" / "net.py"
    code.parent.mkdir()
    code.write_text(FACTORY)
    run = tmp_path / "run"
    data = ["--dataset", "synthetic", "--max-train-samples", "16", "--max-test-samples", "8"]
    assert main(["train", *data, *TINY, "--model", f"{code}:make", "--out", str(run)]) == 0
    return code, run


def test_a_run_trained_here_with_a_factory_file_evaluates_and_records_the_file(tmp_path, capsys):
    code, run = _train_with_factory(tmp_path)
    recorded = json.loads((run / "summary.json").read_text())["model_code"]
    assert recorded == {"file": str(code.resolve()), "sha256": hashlib.sha256(code.read_bytes()).hexdigest()}
    capsys.readouterr()
    assert main(["evaluate", str(run), "--dataset", "synthetic", "--max-test-samples", "8"]) == 0
    assert "sha256 as recorded" in capsys.readouterr().out


def test_a_changed_factory_file_is_not_imported_without_trust_code(tmp_path, capsys):
    code, run = _train_with_factory(tmp_path)
    code.write_text(FACTORY + "\n# changed\n")
    code.with_suffix(".ran").unlink()
    capsys.readouterr()
    assert main(["evaluate", str(run), "--dataset", "synthetic"]) == 2
    assert "has changed since the run was trained" in _one_line_error(capsys)
    assert not code.with_suffix(".ran").exists()  # the file never ran
    assert main(["evaluate", str(run), "--dataset", "synthetic", "--trust-code"]) == 0
    assert code.with_suffix(".ran").exists() and "with --trust-code" in capsys.readouterr().out


def test_code_shipped_inside_a_received_run_folder_needs_trust_code(tmp_path, capsys):
    """A folder from someone else: its config names a factory inside it, its record vouches for it."""
    _, run = _train_with_factory(tmp_path)
    shipped = run / "net.py"
    shipped.write_text(FACTORY)
    config = run / "config.yaml"
    lines = [
        f"  name: {shipped}:make" if ln.strip().startswith("name:") else ln for ln in config.read_text().splitlines()
    ]
    config.write_text("\n".join(lines) + "\n")
    summary = json.loads((run / "summary.json").read_text())
    summary["model_code"] = {"file": str(shipped.resolve()), "sha256": hashlib.sha256(shipped.read_bytes()).hexdigest()}
    (run / "summary.json").write_text(json.dumps(summary))
    capsys.readouterr()
    for command in (["evaluate", str(run), "--dataset", "synthetic"], ["predict", str(run), str(tmp_path)]):
        assert main(command) == 2
        assert "lies inside the run folder" in _one_line_error(capsys)
        assert not shipped.with_suffix(".ran").exists()
    assert main(["evaluate", str(run), "--dataset", "synthetic", "--trust-code"]) == 0
    assert "imported from the run folder with --trust-code" in capsys.readouterr().out
