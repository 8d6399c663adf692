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
