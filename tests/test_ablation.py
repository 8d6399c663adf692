"""`quicktrain ablate`: grid planning, records per arm, resumption, failures recorded."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

from quicktrain.config import Config
from quicktrain.errors import ConfigError
from quicktrain.experiments.ablation import AblationSpec, run_ablation
from quicktrain.experiments.grid import arms, parse_switch, parse_techniques, plan, technique_overrides
from quicktrain.records import dataset_slug
from quicktrain.techniques.accumulation import resolve as resolve_accumulation

TINY = {
    "data.dataset": "synthetic",
    "data.max_train_samples": 64,
    "data.max_test_samples": 20,
    "model.name": "test_vit",
    "run.epochs": 1,
    "run.batch_size": 16,
    "run.tensorboard": False,
}


def test_arms_are_every_subset_baseline_first() -> None:
    grid = arms(("amp", "ga", "pin"))
    assert len(grid) == 8 and grid[0] == () and grid[-1] == ("amp", "ga", "pin")
    assert len(set(grid)) == 8


def test_single_design_is_the_baseline_and_each_technique_alone() -> None:
    assert arms(("amp", "ga", "pin"), "single") == [(), ("amp",), ("ga",), ("pin",)]
    with pytest.raises(ConfigError, match="--design 'pairs' is not one of factorial, single"):
        arms(("amp",), "pairs")


def test_single_design_takes_one_ingredient_out_of_a_recipe() -> None:
    """The recipe is the base config; each switch's on-overrides take one ingredient out, and an
    arm changes nothing but its own switch's keys (the others stay as the recipe has them)."""
    switches = {
        sw.name: sw for sw in map(parse_switch, ["no_la=optim.lookahead=null", "no_ls=optim.label_smoothing=0"])
    }
    recipe = Config.from_overrides({"optim.lookahead": 0.77, "optim.label_smoothing": 0.1})
    spec = AblationSpec(("no_la", "no_ls"), ["m"], ["synthetic"], 2, 4, recipe, Path("out"), switches, "single")
    jobs = spec.jobs()
    assert [(j.arm, j.seed) for j in jobs] == [
        ((), 0),
        (("no_la",), 0),
        (("no_ls",), 0),
        ((), 1),
        (("no_la",), 1),
        (("no_ls",), 1),
    ]
    by_arm = {j.arm: Config.from_overrides(j.overrides, recipe).optim for j in jobs if j.repeat == 0}
    assert (by_arm[()].lookahead, by_arm[()].label_smoothing) == (0.77, 0.1)
    assert (by_arm[("no_la",)].lookahead, by_arm[("no_la",)].label_smoothing) == (None, 0.1)
    assert (by_arm[("no_ls",)].lookahead, by_arm[("no_ls",)].label_smoothing) == (0.77, 0)


def test_only_techniques_under_test_change() -> None:
    off = technique_overrides((), ("amp", "ga", "channels_last"), accum_steps=4)
    on = technique_overrides(("ga",), ("amp", "ga", "channels_last"), accum_steps=4)
    assert off == {
        "techniques.amp": "off",
        "techniques.accum_steps": 1,
        "techniques.micro_batch_size": None,
        "techniques.channels_last": False,
    }
    assert {k for k in on if on[k] != off[k]} == {"techniques.accum_steps"}
    base = Config.from_overrides({"run.batch_size": 64})
    cfg_off, cfg_on = (Config.from_overrides(o, base) for o in (off, on))
    assert split(cfg_off) == (64, 1) and split(cfg_on) == (16, 4)  # same effective batch


def test_plan_interleaves_repeats_with_one_seed_each() -> None:
    jobs = plan(("amp",), ["a", "b"], ["synthetic"], repeats=2, base_seed=5, accum_steps=4)
    assert [(j.model, j.arm, j.seed) for j in jobs] == [
        ("a", (), 5), ("a", ("amp",), 5), ("b", (), 5), ("b", ("amp",), 5),
        ("a", (), 6), ("a", ("amp",), 6), ("b", (), 6), ("b", ("amp",), 6),
    ]  # fmt: skip
    assert len({j.name for j in jobs}) == len(jobs)


def test_bad_technique_names_are_errors() -> None:
    with pytest.raises(ConfigError, match="unknown technique 'fp8'.*accepted: amp, ga"):
        parse_techniques("amp,fp8")
    with pytest.raises(ConfigError, match="twice"):
        parse_techniques("amp,amp")
    assert dataset_slug("imagefolder:../data/cifar10-jpeg/") == "cifar10-jpeg"


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "ablation.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_two_technique_grid_records_every_arm_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = AblationSpec(("amp", "ga"), ["test_vit"], ["synthetic"], 2, 4, Config.from_overrides(TINY), tmp_path)
    run_ablation(spec, argv=["--techniques", "amp,ga"], progress=False)
    rows = _rows(tmp_path)
    assert len(rows) == 8 and all(r["status"] == "completed" for r in rows)
    assert {r["arm"] for r in rows} == {"baseline", "amp", "ga", "amp+ga"}
    for r in rows:  # each arm's record says it used what its name says
        assert (r["amp"] == "bf16") == ("amp" in r["arm"])
        assert r["accum_steps"] == ("4" if "ga" in r["arm"] else "1")
        assert r["optimizer_updates"] == "4"  # 64 samples / batch 16, whatever the split
        summary = json.loads((tmp_path / "runs" / r["run"] / "summary.json").read_text())
        assert summary["micro_steps"] == (16 if "ga" in r["arm"] else 4)
    for repeat in ("0", "1"):  # arms of a repeat: one seed, one data order
        same = [r for r in rows if r["repeat"] == repeat]
        assert len({r["seed"] for r in same}) == 1 and len({r["data_order"] for r in same}) == 1
    assert rows[0]["data_order"] != rows[-1]["data_order"]  # the repeats differ

    def no_rerun(*args: object, **kwargs: object) -> None:
        raise AssertionError("a completed run was started again")

    monkeypatch.setattr(subprocess, "run", no_rerun)
    run_ablation(spec, progress=False)
    assert len(_rows(tmp_path)) == 8


@pytest.mark.slow
def test_a_failing_arm_is_recorded_and_the_grid_goes_on(tmp_path: Path) -> None:
    models = ["no_such_model", "test_vit"]
    spec = AblationSpec(("ga",), models, ["synthetic"], 1, 4, Config.from_overrides(TINY), tmp_path)
    run_ablation(spec, progress=False)
    rows = {(r["model"], r["arm"]): r for r in _rows(tmp_path)}
    assert len(rows) == 4
    failed = rows[("no_such_model", "baseline")]
    assert failed["status"] == "failed" and "unknown model 'no_such_model'" in failed["error"]
    assert rows[("test_vit", "ga")]["status"] == "completed"  # after the failures, the grid went on


def test_ablation_refuses_a_meaningless_grid(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--repeats"):
        AblationSpec(("ga",), ["test_vit"], ["synthetic"], 0, 4, Config(), tmp_path).jobs()
    with pytest.raises(ConfigError, match="--accum-steps"):
        AblationSpec(("ga",), ["test_vit"], ["synthetic"], 1, 1, Config(), tmp_path).jobs()


def test_cli_names_a_bad_technique_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from quicktrain.cli import main

    assert main(["ablate", "--techniques", "amp,fp8", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown technique 'fp8'" in err
    assert not (tmp_path / "a").exists()  # nothing written


@pytest.mark.slow
def test_ablate_with_a_target_stops_each_arm_there_and_reports_time_to_target(tmp_path: Path) -> None:
    from quicktrain.cli import main
    from quicktrain.reporting.report import write_report

    flags = ["--dataset", "synthetic", "--max-train-samples", "64", "--max-test-samples", "20", "--model", "test_vit"]
    flags += ["--batch-size", "16", "--epochs", "2", "--no-tensorboard", "--amp", "off"]
    argv = ["ablate", "--techniques", "ga", "--repeats", "1", "--out", str(tmp_path), "--no-progress", *flags]
    # a target below chance is met by the first evaluation: after update 1 of 8
    assert main([*argv, "--target-accuracy", "0.01", "--eval-every-steps", "1"]) == 0
    rows = _rows(tmp_path)
    assert len(rows) == 2
    for r in rows:
        assert r["stopped_by"] == "target" and r["reached_target"] == "True"
        assert r["optimizer_updates"] == "1" == r["updates_to_target"]
    text = write_report(tmp_path).read_text()
    assert "| ga | 1 | 1 of 1 |" in text and "time to 0.01" in text


def test_switches_define_recipe_ingredients_with_on_and_off_overrides() -> None:
    muon = parse_switch("muon=optim.optimizer=muon,optim.muon_lr=0.2")
    assert muon.on == {"optim.optimizer": "muon", "optim.muon_lr": 0.2} and muon.off == {}
    la = parse_switch("lookahead=optim.lookahead=0.77/optim.lookahead=null")
    switches = {"muon": muon, "lookahead": la}
    assert parse_techniques("amp,muon,lookahead", switches) == ("amp", "muon", "lookahead")
    techniques = ("muon", "lookahead")
    assert technique_overrides((), techniques, 4, switches) == {"optim.lookahead": None}  # muon off: the base's
    both = technique_overrides(("muon", "lookahead"), techniques, 4, switches)
    assert both == {"optim.optimizer": "muon", "optim.muon_lr": 0.2, "optim.lookahead": 0.77}
    with pytest.raises(ConfigError, match="unknown technique 'lowres'"):
        parse_techniques("amp,lowres", switches)
    # a value may be a path: only a "/" followed by section.key= starts the off-overrides
    pre = parse_switch("pre=model.pretrained=/runs/src/best.pt,optim.lr=0.01/model.pretrained=null")
    assert pre.on == {"model.pretrained": "/runs/src/best.pt", "optim.lr": 0.01}
    assert pre.off == {"model.pretrained": None}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("muon", "must be NAME=section.key=value"),
        ("amp=techniques.amp=bf16", "taken by a built-in technique"),
        ("x=optim.lr", "is not of the form section.key=value"),
        ("x=/optim.lr=1", "turns nothing on"),
    ],
)
def test_bad_switches_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_switch(text)


def test_ablate_toggles_a_switch_and_records_what_it_meant(tmp_path: Path) -> None:
    from quicktrain.cli import main

    flags = ["--dataset", "synthetic", "--max-train-samples", "32", "--max-test-samples", "20"]
    flags += ["--model", "test_resnet", "--batch-size", "16", "--epochs", "1", "--no-tensorboard", "--amp", "off"]
    switch = "lowres=data.low_res=16,data.low_res_epochs=1"
    argv = ["ablate", "--techniques", "lowres", "--switch", switch, "--repeats", "1", "--out", str(tmp_path)]
    assert main([*argv, "--no-progress", *flags]) == 0
    rows = {r["arm"]: r for r in _rows(tmp_path)}
    assert set(rows) == {"baseline", "lowres"} and all(r["status"] == "completed" for r in rows.values())
    arm = json.loads((tmp_path / "runs" / rows["lowres"]["run"] / "arm.json").read_text())
    assert arm["switches"]["lowres"]["on"] == {"data.low_res": 16, "data.low_res_epochs": 1}
    low = Config.load(tmp_path / "runs" / rows["lowres"]["run"] / "config.yaml")
    base = Config.load(tmp_path / "runs" / rows["baseline"]["run"] / "config.yaml")
    assert (low.data.low_res, base.data.low_res) == (16, None)


def test_a_switch_not_under_test_is_an_error(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    from quicktrain.cli import main

    argv = ["ablate", "--techniques", "amp", "--switch", "muon=optim.optimizer=muon", "--out", str(tmp_path / "a")]
    assert main(argv) == 2
    assert "--switch muon is defined but not named in --techniques" in capsys.readouterr().err


def split(cfg) -> tuple[int, int]:
    """(micro-batch size, accumulation steps) the accumulation technique derives from ``cfg``."""
    return resolve_accumulation(cfg).split
