"""``benchmarks/collect_records.py``: what goes into ``benchmarks/results/`` from an ablation
folder: record files only, a shared baseline once, no absolute paths, unfinished runs left out."""

from __future__ import annotations

import importlib.util
import json

from conftest import REPO

spec = importlib.util.spec_from_file_location("collect_records", REPO / "benchmarks" / "collect_records.py")
collect_records = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collect_records)


def _run(folder, root, finished=True):
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(f"data_dir: {root}/data\nout: {root.parent}/out/x\n")
    (folder / "model.pt").write_bytes(b"weights")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "last.pt").write_bytes(b"state")
    if finished:
        (folder / "summary.json").write_text(json.dumps({"record": f"{root.parent}/out/x", "home": "~/x"}))


def test_records_only_once_and_relative(tmp_path):
    root = tmp_path / "checkout"
    a, b = tmp_path / "out" / "ema", tmp_path / "out" / "mix"
    for ablation in (a, b):
        _run(ablation / "runs" / "m__d__baseline__r0", root)  # the shared baseline, in both
        (ablation / "ablation.csv").write_text(f"run,record\nm__d__baseline__r0,{root.parent}/out\n")
    _run(b / "runs" / "m__d__mix__r0", root)
    _run(b / "runs" / "m__d__mix__r1", root, finished=False)
    dest = tmp_path / "results"
    assert collect_records.main([str(a), str(b), "--dest", str(dest), "--root", str(root)]) == 0
    runs = sorted(p.name for p in (dest / "runs").iterdir())
    assert runs == ["m__d__baseline__r0", "m__d__mix__r0"]  # the unfinished run is not a record
    assert sorted(p.name for p in (dest / "runs" / "m__d__mix__r0").iterdir()) == ["config.yaml", "summary.json"]
    assert (dest / "ablation-ema.csv").read_text() == "run,record\nm__d__baseline__r0,../out\n"
    assert (dest / "runs" / "m__d__mix__r0" / "config.yaml").read_text() == "data_dir: data\nout: ../out/x\n"
    assert str(tmp_path) not in "".join(p.read_text() for p in dest.rglob("*") if p.is_file())


def test_a_folder_that_is_no_ablation_is_refused(tmp_path, capsys):
    assert collect_records.main([str(tmp_path), "--dest", str(tmp_path / "d")]) == 2
    assert "no runs/" in capsys.readouterr().err


runs_spec = importlib.util.spec_from_file_location("runs_table", REPO / "benchmarks" / "runs_table.py")
runs_table = importlib.util.module_from_spec(runs_spec)
runs_spec.loader.exec_module(runs_table)


def test_runs_table_has_one_row_per_run_with_arm_machine_and_commit(tmp_path):
    for arm, seed, commit in (("bf16", 1, "abc1234"), ("baseline", 0, None)):
        run = tmp_path / "runs" / f"m__d__{arm}__r{seed}"
        run.mkdir(parents=True)
        summary = {"model": "m", "seed": seed, "time_to_target_s": 12.345678, "test_accuracy": 0.5}
        summary["status"] = "completed"
        (run / "summary.json").write_text(json.dumps(summary))
        (run / "arm.json").write_text(json.dumps({"arm": arm}))
        env = {"cpu": "EPYC", "cpu_count": 2, "torch_threads": 1, **({"commit": commit} if commit else {})}
        (run / "env.json").write_text(json.dumps(env))
    assert runs_table.main([str(tmp_path), "--commit", "fallback"]) == 0
    lines = (tmp_path / "runs.csv").read_text().splitlines()
    assert lines[0].split(",")[:5] == ["run", "model", "dataset", "arm", "seed"]
    assert len(lines) == 3 and lines[1].startswith("runs/m__d__baseline__r0,m,,baseline,0,completed")
    assert "12.3457" in lines[2] and lines[2].endswith('"EPYC, 2 cores, 1 threads",abc1234')
    assert lines[1].endswith(",fallback")  # no commit in env.json: the one given for the folder
    env = {"cpu": "AMD EPYC", "cpu_model": "x86 family 26 model 2 stepping 1", "cpu_count": 2, "torch_threads": 2}
    assert runs_table.machine(env) == "AMD EPYC (x86 family 26 model 2 stepping 1), 2 cores, 2 threads"


def test_every_results_folder_with_runs_leads_with_its_table():
    results = REPO / "benchmarks" / "results"
    for folder in sorted(p for p in results.iterdir() if p.is_dir()):
        summaries = list(folder.rglob("summary.json"))
        if not summaries:
            continue
        table = folder / "runs.csv"
        assert table.is_file(), f"{folder.name} has run records but no runs.csv"
        assert len(table.read_text().splitlines()) == len(summaries) + 1, f"{folder.name}/runs.csv is stale"
        readme = folder / "README.md"
        assert readme.is_file() and "runs.csv" in readme.read_text().split("\n\n")[1], folder.name


def test_env_records_the_commit_of_the_code_that_ran(tmp_path, monkeypatch):
    import shutil
    import subprocess

    from quicktrain.engine import environment

    if shutil.which("git") is None or not (REPO / ".git").exists():
        assert environment.source_commit() is None
        return
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True)
    assert environment.source_commit().split("+")[0] == head.stdout.strip()
    monkeypatch.setenv("PATH", str(tmp_path))  # no git to ask: an installed wheel's answer
    assert environment.source_commit() is None
