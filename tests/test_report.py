"""`quicktrain report` on hand-written run records: tables, plots and findings follow the numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from quicktrain.cli import main
from quicktrain.reporting.report import write_report
from quicktrain.reporting.runs import group_runs, load_runs, technique_arm

ARM_FIELDS = {
    "baseline": {"amp": "off", "accum_steps": 1},
    "amp": {"amp": "bf16", "accum_steps": 1},
    "ga": {"amp": "off", "accum_steps": 4},
}


def write_run(root: Path, model: str, arm: str, seed: int, time_s: float, acc: float, dataset: str = "synthetic"):
    folder = root / f"{model}-{dataset}-{arm}-{seed}"
    folder.mkdir(parents=True)
    summary = {
        "status": "completed",
        "model": model,
        "dataset": dataset,
        "seed": seed,
        "train_time_s": time_s,
        "images_per_s": 1000 / time_s,
        "test_accuracy": acc,
        "test_f1_macro": acc - 0.01,
        "device": "cpu",
        **ARM_FIELDS[arm],
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    rows = [{"epoch": e, "test_accuracy": acc * e / 2} for e in (1, 2)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def amp_faster(tmp_path: Path) -> Path:
    for seed, (base, amp) in enumerate([(10.0, 5.0), (10.5, 5.25), (9.8, 4.9)]):
        write_run(tmp_path, "m1", "baseline", seed, base, 0.80 + 0.01 * seed)
        write_run(tmp_path, "m1", "amp", seed, amp, 0.80 + 0.01 * seed)
        write_run(tmp_path, "m2", "baseline", seed, base * 2, 0.90)
        write_run(tmp_path, "m2", "amp", seed, amp * 2, 0.90)
    return tmp_path


def test_arm_is_read_from_what_the_run_used() -> None:
    assert technique_arm({"amp": "off", "accum_steps": 1}) == "baseline"
    assert technique_arm({"amp": "bf16", "accum_steps": 2, "channels_last": True}) == "amp+ga+channels_last"


def test_tables_hold_medians_and_paired_speedups(amp_faster: Path) -> None:
    groups = group_runs(load_runs(amp_faster))
    amp = groups[("m1", "synthetic")]["amp"]
    assert amp.median("train_time_s") == pytest.approx(5.0)
    assert sorted(amp.speedups) == pytest.approx([2.0, 2.0, 2.0])  # each repeat against its own baseline
    text = write_report(amp_faster).read_text()
    assert "| amp | 3 | 5.0 | 2.00x [2.00-2.00] |" in text
    assert "| baseline | 3 | 10.0 | 1.00x [1.00-1.00] |" in text


def test_findings_say_amp_is_faster(amp_faster: Path) -> None:
    text = write_report(amp_faster).read_text()
    assert "m1 on synthetic (n=3 baseline runs): amp alone: 2.00x [2.00-2.00], faster" in text
    assert "amp: faster in every group (2)" in text
    assert "amp saves 50% of training time" in text
    assert "most accurate m2, fastest m1" in text  # RQ2: m2 is slower but more accurate: both on the front


def test_overlapping_repeats_are_not_resolved(tmp_path: Path) -> None:
    for seed, (base, amp) in enumerate([(10.0, 9.0), (9.5, 11.0), (10.5, 10.0)]):
        write_run(tmp_path, "m1", "baseline", seed, base, 0.8)
        write_run(tmp_path, "m1", "amp", seed, amp, 0.8)
    text = write_report(tmp_path).read_text()
    assert "amp alone: 1.05x [0.86-1.11], not resolved (repeats overlap)" in text
    assert "faster in every" not in text
    assert "Only one model and dataset" in text


def test_accuracy_loss_beyond_tolerance_is_not_a_free_saving(tmp_path: Path) -> None:
    for seed in range(2):
        write_run(tmp_path, "m1", "baseline", seed, 10.0 + seed, 0.80 + 0.001 * seed)
        write_run(tmp_path, "m1", "amp", seed, 5.0 + seed, 0.70 + 0.001 * seed)  # 10 points worse
        write_run(tmp_path, "m1", "ga", seed, 8.0 + seed, 0.80 + 0.001 * seed)
    text = write_report(tmp_path, tolerance=0.01).read_text()
    assert "amp alone: 1.92x [1.83-2.00], faster; accuracy lower (-10.0 pts)" in text
    assert "m1 on synthetic: ga saves 19% of training time" in text  # not amp, which loses accuracy


def test_plots_are_pngs_that_open(amp_faster: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    out = tmp_path_factory.mktemp("report")
    write_report(amp_faster, out)
    for name in ("speedup.png", "tradeoff.png", "curves.png"):
        with Image.open(out / name) as image:
            image.verify()
            assert image.format == "PNG"
    assert (out / "report.md").is_file()


def test_failed_runs_are_listed(amp_faster: Path) -> None:
    bad = amp_faster / "broken"
    bad.mkdir()
    (bad / "summary.json").write_text(json.dumps({"status": "failed", "error": "boom", "model": "m1", "seed": 9}))
    text = write_report(amp_faster).read_text()
    assert "`broken` (baseline): failed: boom" in text


def test_cli_report_errors_on_a_folder_without_records(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no run records" in err
