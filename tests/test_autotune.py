"""`quicktrain autotune`: measured choice, ties keep the simpler setting, a usable config out."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from quicktrain.cli import main
from quicktrain.config import Config
from quicktrain.experiments.autotune import Candidate, autotune, candidates, pick

PLAIN = Candidate()
BF16 = Candidate(amp="bf16")
BF16_CL = Candidate(amp="bf16", channels_last=True)
CL = Candidate(channels_last=True)


def test_the_fastest_median_wins() -> None:
    assert pick({PLAIN: [100, 101, 99], BF16: [190, 200, 210], CL: [120, 119, 121]}) == BF16


def test_a_tie_within_tolerance_keeps_the_simpler_setting() -> None:
    # bf16+channels_last is 2% faster than bf16 alone: within 3%, so one switch fewer wins
    assert pick({PLAIN: [100], BF16: [200], BF16_CL: [204]}, tolerance=0.03) == BF16
    assert pick({PLAIN: [100], BF16: [200], BF16_CL: [220]}, tolerance=0.03) == BF16_CL  # 10%: real


def test_a_tie_within_noise_keeps_the_simpler_setting() -> None:
    # medians 200 vs 210 (5% apart), but bf16's own trials reach 250: the difference is noise
    assert pick({BF16: [150, 200, 250], BF16_CL: [205, 210, 215]}) == BF16
    assert pick({BF16: [195, 200, 201], BF16_CL: [205, 210, 215]}) == BF16_CL  # tight repeats: resolved


def test_every_candidate_is_measured_and_the_config_gets_the_winner() -> None:
    timed = []
    speeds = {PLAIN: 100.0, BF16: 150.0, CL: 260.0, BF16_CL: 200.0}  # e.g. efficientnet_b0 on this CPU

    def timer(candidate: Candidate):
        def run() -> float:
            timed.append(candidate)
            return speeds[candidate]

        return run

    result = autotune(Config(), list(speeds), repeats=2, timer=timer)
    others = [c for c in speeds if c != PLAIN]
    assert sorted(map(str, timed)) == sorted(map(str, others * 2 + [PLAIN] * 2 * len(others)))  # each with plain
    assert result.best == CL
    assert (result.config.techniques.amp, result.config.techniques.channels_last) == ("off", True)
    assert result.table()[0]["candidate"] == "channels_last <- chosen"
    assert result.results[CL] == pytest.approx([260.0, 260.0])  # ratio to plain x plain's median


def test_at_most_two_candidates_are_built_at_once_and_drift_is_paired_out() -> None:
    import gc
    import weakref

    live: set[str] = set()
    most = {"n": 0}
    clock = {"t": 0}
    speeds = {PLAIN: 100.0, BF16: 150.0, BF16_CL: 200.0, CL: 260.0}  # CL timed last, slowest machine

    class Built:
        def __init__(self, candidate: Candidate) -> None:
            self.candidate = candidate
            live.add(candidate.name)
            most["n"] = max(most["n"], len(live))
            weakref.finalize(self, live.discard, candidate.name)

        def __call__(self) -> float:
            clock["t"] += 1
            return speeds[self.candidate] * 0.95 ** clock["t"]  # the machine slows down all the time

    result = autotune(Config(), list(speeds), repeats=3, timer=Built)
    gc.collect()
    assert most["n"] == 2
    assert result.best == CL  # drift hit the late candidates, but each is compared with plain beside it


def test_switches_restrict_the_grid() -> None:
    import torch

    from quicktrain.errors import ConfigError

    grid = candidates(torch.device("cpu"), with_compile=False, switches=("channels_last",))
    assert grid == [PLAIN, CL]
    with pytest.raises(ConfigError, match="unknown autotune switch 'fp8'"):
        candidates(torch.device("cpu"), with_compile=False, switches=("fp8",))


def test_candidates_on_this_cpu_skip_fp16_and_compile_unless_asked() -> None:
    import torch

    cpu = candidates(torch.device("cpu"), with_compile=False)
    assert all(c.get("amp") != "fp16" and not c.get("compile") for c in cpu) and PLAIN in cpu
    assert any(c.get("compile") for c in candidates(torch.device("cpu"), with_compile=True))


@pytest.mark.slow
def test_real_tiny_model_writes_a_config_that_trains(tmp_path: Path) -> None:
    out = tmp_path / "tuned.yaml"
    argv = ["autotune", "--model", "test_resnet", "--batch-size", "16", "--repeats", "1", "--steps", "1",
            "--warmup", "1", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = out.read_text()
    assert "<- chosen" in text and "plain" in text  # the measured table travels with the config
    cfg = Config.load(out)
    assert cfg.model.name == "test_resnet" and cfg.run.batch_size == 16
    run = ["train", "--config", str(out), "--dataset", "synthetic", "--max-train-samples", "32", "--epochs", "1",
           "--out", str(tmp_path / "run"), "--no-progress"]  # fmt: skip
    assert main(run) == 0


def test_techniques_not_tuned_keep_the_base_configs_value() -> None:
    base = Config.from_overrides({"techniques.amp": "bf16", "techniques.channels_last": True})
    cands = candidates(torch.device("cpu"), with_compile=False, switches=("loader",), base=base)
    assert [c.name for c in cands] == ["amp=bf16+channels_last", "amp=bf16+channels_last+loader=device"]
    assert all(c.overrides()["techniques.amp"] == "bf16" for c in cands)


def _noisy(speeds: dict, swap_on: set[int]):
    """A fake clock: each call returns its candidate's speed, except on the calls in ``swap_on``,
    where load from other work makes the slow arm read fast and the fast one slow (the two swap)."""
    calls = {"n": 0}

    def timer(candidate: Candidate):
        def run() -> float:
            calls["n"] += 1
            if calls["n"] in swap_on:
                return speeds[PLAIN] if candidate == BF16 else speeds[BF16]
            return speeds[candidate]

        return run

    return timer


def test_noise_that_swaps_two_arms_is_reported_not_crowned() -> None:
    speeds = {PLAIN: 100.0, BF16: 170.0}
    quiet = autotune(Config(), list(speeds), repeats=3, timer=_noisy(speeds, set()))
    assert quiet.best == BF16 and quiet.tied == [BF16] and "bf16 is the fastest" in quiet.verdict()
    # calls: ref build..., then trial pairs (bf16, plain), (plain, bf16), (bf16, plain): swap the second pair
    loaded = autotune(Config(), list(speeds), repeats=3, timer=_noisy(speeds, {3, 4}))
    assert set(loaded.tied) == {PLAIN, BF16} and loaded.best == PLAIN
    assert loaded.verdict().startswith("not resolved: plain, amp=bf16 overlap")
    row = next(r for r in loaded.table() if r["candidate"].startswith("amp=bf16"))
    assert row["vs_plain_min"] < 1 < row["vs_plain_max"]  # the spread the verdict speaks of


def test_load_that_slows_both_sides_of_a_pair_alike_is_paired_out() -> None:
    clock = {"t": 0}
    speeds = {PLAIN: 100.0, BF16: 170.0}

    def timer(candidate: Candidate):
        def run() -> float:
            clock["t"] += 1
            load = 0.3 if (clock["t"] - 1) // 2 == 1 else 1.0  # the second trial pair runs beside other work
            return speeds[candidate] * load

        return run

    result = autotune(Config(), list(speeds), repeats=3, timer=timer)
    assert result.best == BF16 and result.tied == [BF16]  # the reference's raw spread (30-100) does not matter
