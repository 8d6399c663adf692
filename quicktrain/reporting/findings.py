"""The study's four questions, answered in sentences generated from the numbers, claiming no
more than the runs show. Every finding names the runs it rests on.

Rules (documented in docs/measuring.md and in each report):
- **Speed.** With a target accuracy, a combination's speed-up is its time to the target against
  the baseline's, paired by seed, and only when every seed of both reached the target; one that
  reached it in k of n seeds is shown as such and gets no speed-up. Without a target, speed-ups
  are per fixed number of epochs and are labelled so. A speed difference is "resolved" only
  when the seeds do not overlap (every run of one side beats every run of the other; at least
  two per side).
- **Accuracy.** Runs whose median test accuracy is below 1.5x chance (1 / classes) are "near
  chance": their accuracy is not informative, and no accuracy or time-saved claim is made from
  them. "No accuracy loss" needs at least 3 seeds per side and a drop within both the tolerance
  and the seed-to-seed spread (the larger min-max range of the two sides); "lower"/"higher"
  need every seed of one side beyond every seed of the other and a change beyond the
  tolerance; anything else is "not resolved".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from quicktrain.reporting.runs import BASELINE, ArmStats, Groups, compare_spans


@dataclass(frozen=True)
class Verdict:
    kind: str  # not_informative | no_loss | lower | higher | not_resolved | missing
    text: str


def _range(span: tuple[float, float]) -> float:
    return span[1] - span[0]


def accuracy_verdict(arm: ArmStats, base: ArmStats, tolerance: float) -> Verdict:
    """How ``arm``'s final test accuracy compares with the baseline's, by the rules above."""
    a, b = arm.median("test_accuracy"), base.median("test_accuracy")
    if a is None or b is None:
        return Verdict("missing", "no test accuracy")
    for side in (base, arm):
        if side.near_chance():
            return Verdict(
                "not_informative",
                f"accuracy not informative: runs ended near chance ({side.median('test_accuracy'):.3f} vs chance "
                f"{side.chance():.3f})",
            )
    sa, sb = arm.span("test_accuracy"), base.span("test_accuracy")
    delta, spread = a - b, max(_range(sa), _range(sb))
    change = f"{100 * delta:+.1f} pts"
    separated = compare_spans(sa, sb, arm.n, base.n)
    if separated == -1 and -delta > tolerance:
        return Verdict("lower", f"accuracy lower ({change}, every seed below the baseline's)")
    if separated == 1 and delta > tolerance:
        return Verdict("higher", f"accuracy higher ({change}, every seed above the baseline's)")
    if arm.n >= 3 and base.n >= 3 and -delta <= tolerance and -delta <= spread:
        return Verdict(
            "no_loss",
            f"no accuracy loss ({change}; within the {100 * tolerance:.1f}-pt tolerance and the seed spread of "
            f"{100 * spread:.1f} pts)",
        )
    fewest = min(arm.n, base.n)
    why = f"{fewest} seed{'s' if fewest != 1 else ''} on a side, 3 needed" if fewest < 3 else "outside the spread"
    return Verdict("not_resolved", f"accuracy change not resolved ({change}; {why})")


def _spread_text(values: list[float], spec: str = ".2f", unit: str = "") -> str:
    """``2.00x [1.90-2.10]``: median with its unit, then min-max."""
    return f"{statistics.median(values):{spec}}{unit} [{min(values):{spec}}-{max(values):{spec}}]"


def target_mode(arms: dict[str, ArmStats]) -> bool:
    return any(a.target is not None for a in arms.values())


def budget_mode(arms: dict[str, ArmStats]) -> bool:
    """No target, and the runs had a training-time budget: compare accuracy at equal time."""
    runs = [r for a in arms.values() for r in a.runs]
    return not target_mode(arms) and bool(runs) and all(r.get("max_time_s") for r in runs)


def stopped_at_target(arm: ArmStats) -> bool:
    return any(r.get("stopped_by") == "target" for r in arm.runs)


def speed_verdict(arm: ArmStats, base: ArmStats) -> int:
    """+1 faster than the baseline in every seed, -1 slower, 0 unresolved: on time to target
    when the runs have a target (0 unless every seed of both reached it), else per fixed work."""
    if arm.target is not None or base.target is not None:
        if not (arm.all_reached and base.all_reached):
            return 0
        key = "time_to_target_s"
    else:
        key = "train_time_s"
    return -compare_spans(arm.span(key), base.span(key), arm.n, base.n)


SPEED_WORDS = {1: "faster", -1: "slower", 0: "not resolved (seeds overlap)"}


def speed_words(arm: ArmStats, base: ArmStats) -> str:
    """The verdict in words; an unresolved one says why (too few seeds, or overlapping ones)."""
    verdict = speed_verdict(arm, base)
    if verdict == 0 and min(arm.n, base.n) < 2:
        return "not resolved (one seed on a side: 2 or more needed)"
    return SPEED_WORDS[verdict]


def speed_text(arm: ArmStats, base: ArmStats) -> str:
    if arm.target is None:
        if not arm.speedups:
            return "no completed runs"
        verdict = speed_words(arm, base)
        return f"{_spread_text(arm.speedups, unit='x')} per fixed work (not to a target), {verdict}"
    target = f"{arm.target:g}"
    if not arm.all_reached:
        return f"reached {target} in {arm.reached} of {arm.n} seeds: no speed-up"
    ttt = f"time to {target} {_spread_text(arm.values('time_to_target_s'), '.1f', 's')}"
    if not arm.target_speedups:
        return f"{ttt}; no speed-up (the baseline reached it in {base.reached} of {base.n} seeds)"
    return f"{ttt}, {_spread_text(arm.target_speedups, unit='x')}, {speed_words(arm, base)}"


def _group_name(key: tuple[str, str]) -> str:
    return f"{key[0]} on {key[1]}"


def _cite(*arms: ArmStats) -> str:
    """`` Runs: `a__r0`, `a__r1` `` ... compacted to `` `a__r{0,1}` `` where folders follow the
    ablation's ``NAME__rK`` pattern."""
    repeats: dict[str, list[str]] = {}
    for name in (n for arm in arms for n in arm.names()):
        stem, sep, k = name.rpartition("__r")
        if sep and k.isdigit():
            repeats.setdefault(stem, []).append(k)
        else:
            repeats.setdefault(name, [])
    cited = [
        f"`{stem}__r{{{','.join(ks)}}}`" if len(ks) > 1 else f"`{stem}{'__r' + ks[0] if ks else ''}`"
        for stem, ks in repeats.items()
    ]
    return " Runs: " + ", ".join(cited) + "." if cited else ""


def _compared(arms: dict[str, ArmStats]) -> list[ArmStats]:
    """Each technique alone, then the full combination."""
    singles = [a for a in arms.values() if a.size == 1 and a.runs]
    full = max((a for a in arms.values() if a.runs), key=lambda a: a.size)
    return [*singles, *([full] if full.size > 1 else [])]


def rq1(groups: Groups, tolerance: float) -> list[str]:
    """Each technique alone and the full combination, against the baseline."""
    lines = []
    for key, arms in groups.items():
        base = arms.get(BASELINE)
        if base is None or not base.runs:
            lines.append(f"- {_group_name(key)}: no completed baseline run, so no comparison.")
            continue
        parts = []
        shown = _compared(arms)
        for arm in shown:
            label = f"{arm.arm} alone" if arm.size == 1 else f"all combined ({arm.arm})"
            if budget_mode(arms):
                acc = _spread_text(arm.values("test_accuracy"), ".3f")
                parts.append(
                    f"{label}: accuracy at equal training time {acc}, {accuracy_verdict(arm, base, tolerance).text}"
                )
                continue
            accuracy = (
                "each run stopped at the target"
                if stopped_at_target(arm) or stopped_at_target(base)
                else accuracy_verdict(arm, base, tolerance).text
            )
            parts.append(f"{label}: {speed_text(arm, base)}; {accuracy}")
        head = f"- {_group_name(key)} (n={base.n} baseline runs"
        head += f", target {base.target:g}" if base.target is not None else ""
        head += f", baseline reached it in {base.reached} of {base.n})" if base.target is not None else ")"
        lines.append(head + ": " + "; ".join(parts) + "." + _cite(base, *shown))
    return lines


def _informative(arm: ArmStats) -> bool:
    return arm.all_reached if arm.target is not None else not arm.near_chance()


def _time_key(arm: ArmStats) -> str:
    return "time_to_target_s" if arm.target is not None else "train_time_s"


def best_no_loss(arms: dict[str, ArmStats], tolerance: float) -> ArmStats | None:
    """The combination with the shortest median time (to the target, when there is one) among
    those that qualify: every seed reached the target (with a target), or no accuracy loss by
    the rules above (without one). The baseline qualifies by definition when it is informative."""
    base = arms.get(BASELINE)
    if base is None or not base.runs or not _informative(base):
        return None
    if base.target is not None:
        keep = [a for a in arms.values() if a.all_reached]
    else:
        keep = [
            base,
            *(a for a in arms.values() if a is not base and accuracy_verdict(a, base, tolerance).kind == "no_loss"),
        ]
    return min(keep, key=lambda a: a.median(_time_key(a)))


def rq3(groups: Groups, tolerance: float) -> list[str]:
    lines = []
    for key, arms in groups.items():
        base = arms.get(BASELINE)
        name = _group_name(key)
        if base is None or not base.runs:
            continue
        if budget_mode(arms):
            lines.append(
                f"- {name}: runs had equal training time and no target: time saved is not measured "
                "(use --target-accuracy); RQ1 compares accuracy at equal time."
            )
            continue
        if base.target is None and any(a.near_chance() for a in arms.values() if a.runs):
            worst = min((a for a in arms.values() if a.runs), key=lambda a: a.median("test_accuracy"))
            lines.append(
                f"- {name}: accuracy not informative: runs ended near chance ({worst.median('test_accuracy'):.3f} "
                f"vs chance {worst.chance():.3f}), so no claim about time saved without losing accuracy."
                + _cite(*arms.values())
            )
            continue
        if base.target is not None and not base.all_reached:
            lines.append(
                f"- {name}: the baseline reached the target {base.target:g} in {base.reached} of {base.n} seeds: no "
                "time-to-target comparison." + _cite(base)
            )
            continue
        best = best_no_loss(arms, tolerance)
        if best is None or best.arm == BASELINE:
            rule = "reaches the target in every seed" if base.target is not None else "shows no accuracy loss"
            lines.append(f"- {name}: no combination is faster than the baseline and {rule}." + _cite(*arms.values()))
            continue
        key_t = _time_key(best)
        saved = 1 - best.median(key_t) / base.median(key_t)
        resolved = speed_verdict(best, base) == 1
        if base.target is not None:
            what = f"reaches test accuracy {base.target:g} in {100 * saved:.0f}% less training time"
            extra = (
                "" if stopped_at_target(best) else f"; final accuracy: {accuracy_verdict(best, base, tolerance).text}"
            )
        else:
            verdict = accuracy_verdict(best, base, tolerance).text
            what, extra = f"saves {100 * saved:.0f}% of training time per fixed work with {verdict}", ""
        lines.append(
            f"- {name}: {best.arm} {what} ({base.median(key_t):.1f}s -> {best.median(key_t):.1f}s, medians){extra}; "
            + ("faster in every seed." if resolved else f"but the saving is {speed_words(best, base)}.")
            + _cite(base, best)
        )
    return lines


def rq2(groups: Groups, tolerance: float) -> list[str]:
    """Per dataset: each model's best qualifying combination, and which models are on the
    accuracy/time Pareto front. Only runs that reached the target (or, without one, ended
    clearly above chance) take part."""
    lines = []
    for dataset in sorted({d for _, d in groups}):
        points, left_out = [], []
        for (model, d), arms in groups.items():
            if d != dataset:
                continue
            best = best_no_loss(arms, tolerance) or _fastest(arms)
            if best is None or not _informative(best):
                left_out.append(model)
            else:
                points.append((model, best))
        note = f" Left out (no run reached the target, or near chance): {', '.join(left_out)}." if left_out else ""
        if len(points) < 2:
            lines.append(f"- {dataset}: fewer than two models with informative runs, so no trade-off to compare.{note}")
            continue
        front = [(m, a) for m, a in points if not any(_dominates(b, a) for _, b in points if b is not a)]
        top = max(points, key=lambda p: p[1].median("test_accuracy"))
        quick = min(points, key=lambda p: p[1].median(_time_key(p[1])))
        desc = ", ".join(
            f"{m} ({a.arm}: acc {a.median('test_accuracy'):.3f}, {a.median(_time_key(a)):.1f}s"
            + (" to target)" if a.target is not None else ")")
            for m, a in front
        )
        lines.append(
            f"- {dataset}: most accurate {top[0]}, fastest {quick[0]}; best trade-off (no other model both faster "
            f"and more accurate): {desc}.{note}" + _cite(*(a for _, a in points))
        )
    return lines


def _fastest(arms: dict[str, ArmStats]) -> ArmStats | None:
    done = [a for a in arms.values() if a.runs and _informative(a)]
    return min(done, key=lambda a: a.median(_time_key(a))) if done else None


def _dominates(a: ArmStats, b: ArmStats) -> bool:
    ta, tb = a.median(_time_key(a)), b.median(_time_key(b))
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
    left_out = [_group_name(k) for k in groups if _group_name(k) not in fastest]
    note = f" (left out, no informative runs: {', '.join(left_out)})" if left_out else ""
    if not fastest:
        lines.append("- No group has informative runs to name a fastest combination.")
    elif len(set(fastest.values())) == 1:
        where = "every group" if not left_out else f"every group with informative runs ({len(fastest)})"
        lines.append(f"- The fastest informative combination is {next(iter(fastest.values()))} in {where}{note}.")
    else:
        lines.append(
            "- The fastest informative combination differs: "
            + ", ".join(f"{g}: {a}" for g, a in fastest.items())
            + f"{note}."
        )
    return lines


def findings(groups: Groups, tolerance: float) -> str:
    sections = [
        (
            "RQ1: each technique alone and combined, against the baseline (median [min-max] over seeds)",
            rq1(groups, tolerance),
        ),
        ("RQ2: best accuracy/time trade-off across models", rq2(groups, tolerance)),
        (f"RQ3: time saved without losing accuracy (tolerance {100 * tolerance:.1f} pts)", rq3(groups, tolerance)),
        ("RQ4: does it hold across models and datasets?", rq4(groups)),
    ]
    return "\n\n".join(f"**{title}**\n\n" + "\n".join(lines or ["- nothing to compare."]) for title, lines in sections)
