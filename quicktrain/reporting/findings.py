"""The study's four questions, answered in sentences generated from the numbers.

A difference counts as resolved only when the repeats of the two sides do not overlap (every
run of one side beats every run of the other) and each side has at least two runs; otherwise
the text says it is not resolved instead of naming a winner.
"""

from __future__ import annotations

import statistics

from quicktrain.reporting.runs import BASELINE, ArmStats, Groups, compare_spans

SPEED_WORDS = {1: "faster", -1: "slower", 0: "not resolved (repeats overlap)"}
ACCURACY_WORDS = {0: "accuracy unchanged within tolerance or repeat spread", -1: "accuracy lower", 1: "accuracy higher"}


def speed_verdict(arm: ArmStats, base: ArmStats) -> int:
    """+1 when ``arm`` trains faster than the baseline in every repeat, -1 slower, 0 unresolved."""
    return -compare_spans(arm.span("train_time_s"), base.span("train_time_s"), arm.n, base.n)


def accuracy_verdict(arm: ArmStats, base: ArmStats, tolerance: float) -> int:
    """-1 when ``arm`` loses more than ``tolerance`` accuracy beyond the repeat spread, +1 when it
    gains beyond it, 0 when the change is within tolerance or the spread."""
    a, b = arm.span("test_accuracy"), base.span("test_accuracy")
    if a is None or b is None:
        return 0
    verdict = compare_spans(a, b, arm.n, base.n)
    if verdict and abs(arm.median("test_accuracy") - base.median("test_accuracy")) <= tolerance:
        return 0
    return verdict


def _speedup_text(arm: ArmStats) -> str:
    s = arm.speedups
    if not s:
        return "no completed runs"
    return f"{statistics.median(s):.2f}x [{min(s):.2f}-{max(s):.2f}]"


def _acc_change(arm: ArmStats, base: ArmStats) -> str:
    a, b = arm.median("test_accuracy"), base.median("test_accuracy")
    return "n/a" if a is None or b is None else f"{100 * (a - b):+.1f} pts"


def _group_name(key: tuple[str, str]) -> str:
    return f"{key[0]} on {key[1]}"


def rq1(groups: Groups, tolerance: float) -> list[str]:
    """Each technique alone and the full combination, against the baseline."""
    lines = []
    for key, arms in groups.items():
        base = arms.get(BASELINE)
        if base is None or not base.runs:
            lines.append(f"- {_group_name(key)}: no completed baseline run, so no speed-ups.")
            continue
        parts = []
        singles = [a for a in arms.values() if a.size == 1 and a.runs]
        full = max((a for a in arms.values() if a.runs), key=lambda a: a.size)
        for arm in [*singles, *([full] if full.size > 1 else [])]:
            verdict = SPEED_WORDS[speed_verdict(arm, base)]
            accuracy = ACCURACY_WORDS[accuracy_verdict(arm, base, tolerance)]
            label = f"{arm.arm} alone" if arm.size == 1 else f"all combined ({arm.arm})"
            parts.append(f"{label}: {_speedup_text(arm)}, {verdict}; {accuracy} ({_acc_change(arm, base)})")
        lines.append(f"- {_group_name(key)} (n={base.n} baseline runs): " + "; ".join(parts) + ".")
    return lines


def best_no_loss(arms: dict[str, ArmStats], tolerance: float) -> ArmStats | None:
    """The fastest combination (median time) whose median accuracy is within ``tolerance`` of
    the baseline's, or None without a baseline."""
    base = arms.get(BASELINE)
    if base is None or not base.runs:
        return None
    floor = base.median("test_accuracy") - tolerance
    keep = [a for a in arms.values() if a.runs and a.median("test_accuracy") >= floor]
    return min(keep, key=lambda a: a.median("train_time_s"))


def rq3(groups: Groups, tolerance: float) -> list[str]:
    lines = []
    for key, arms in groups.items():
        best = best_no_loss(arms, tolerance)
        if best is None:
            continue
        base = arms[BASELINE]
        saved = 1 - best.median("train_time_s") / base.median("train_time_s")
        if best.arm == BASELINE:
            lines.append(f"- {_group_name(key)}: no combination is faster than the baseline without losing accuracy.")
            continue
        resolved = speed_verdict(best, base) == 1
        lines.append(
            f"- {_group_name(key)}: {best.arm} saves {100 * saved:.0f}% of training time "
            f"({base.median('train_time_s'):.1f}s -> {best.median('train_time_s'):.1f}s), accuracy "
            f"{_acc_change(best, base)}; "
            + ("faster in every repeat." if resolved else "but the repeats overlap: the saving is not resolved.")
        )
    return lines


def rq2(groups: Groups, tolerance: float) -> list[str]:
    """Per dataset: each model's fastest no-loss combination, and which models are on the
    accuracy/time Pareto front."""
    lines = []
    datasets = sorted({d for _, d in groups})
    for dataset in datasets:
        points = []
        for (model, d), arms in groups.items():
            if d != dataset:
                continue
            best = best_no_loss(arms, tolerance) or _fastest(arms)
            if best is not None:
                points.append((model, best))
        if len(points) < 2:
            lines.append(f"- {dataset}: only one model, so no trade-off to compare.")
            continue
        front = [(m, a) for m, a in points if not any(_dominates(b, a) for _, b in points if b is not a)]
        top = max(points, key=lambda p: p[1].median("test_accuracy"))
        quick = min(points, key=lambda p: p[1].median("train_time_s"))
        desc = ", ".join(
            f"{m} ({a.arm}: acc {a.median('test_accuracy'):.3f}, {a.median('train_time_s'):.1f}s)" for m, a in front
        )
        lines.append(
            f"- {dataset}: most accurate {top[0]}, fastest {quick[0]}; best trade-off (no other model both faster "
            f"and more accurate): {desc}."
        )
    return lines


def _fastest(arms: dict[str, ArmStats]) -> ArmStats | None:
    done = [a for a in arms.values() if a.runs]
    return min(done, key=lambda a: a.median("train_time_s")) if done else None


def _dominates(a: ArmStats, b: ArmStats) -> bool:
    ta, tb = a.median("train_time_s"), b.median("train_time_s")
    aa, ab = a.median("test_accuracy"), b.median("test_accuracy")
    return ta <= tb and aa >= ab and (ta < tb or aa > ab)


def rq4(groups: Groups) -> list[str]:
    """Does each technique's effect (and the fastest combination) agree across groups?"""
    if len(groups) < 2:
        return ["- Only one model and dataset: generalisation is not tested here."]
    lines = []
    techniques = sorted({a.arm for arms in groups.values() for a in arms.values() if a.size == 1})
    for tech in techniques:
        verdicts = {}
        for key, arms in groups.items():
            base, arm = arms.get(BASELINE), arms.get(tech)
            if base and arm and base.runs and arm.runs:
                verdicts[_group_name(key)] = speed_verdict(arm, base)
        values = set(verdicts.values())
        if values == {1}:
            lines.append(f"- {tech}: faster in every group ({len(verdicts)}).")
        elif values == {-1}:
            lines.append(f"- {tech}: slower in every group ({len(verdicts)}).")
        else:
            detail = ", ".join(f"{g}: {SPEED_WORDS[v].split(' (')[0]}" for g, v in verdicts.items())
            lines.append(f"- {tech}: does not generalise uniformly ({detail}).")
    fastest = {_group_name(k): f.arm for k, arms in groups.items() if (f := _fastest(arms))}
    if len(set(fastest.values())) == 1:
        lines.append(f"- The fastest combination is {next(iter(fastest.values()))} in every group.")
    else:
        lines.append("- The fastest combination differs: " + ", ".join(f"{g}: {a}" for g, a in fastest.items()) + ".")
    return lines


def findings(groups: Groups, tolerance: float) -> str:
    sections = [
        ("RQ1: each technique alone and combined (speed-up over baseline, median [min-max])", rq1(groups, tolerance)),
        ("RQ2: best accuracy/time trade-off across models", rq2(groups, tolerance)),
        (f"RQ3: time saved without losing accuracy (tolerance {100 * tolerance:.1f} pts)", rq3(groups, tolerance)),
        ("RQ4: does it hold across models and datasets?", rq4(groups)),
    ]
    return "\n\n".join(f"**{title}**\n\n" + "\n".join(lines or ["- nothing to compare."]) for title, lines in sections)
