"""The Muon speedrun recipe's training step, for benchmarks of CPU step techniques
(``conv_wgrad.py``, ``step_profile.py``, ``host_allocator.py``); run as a script, the recipe's
step against a variant of it, interleaved:

    python benchmarks/recipe_step.py --batch 1024 --name silu --set model.model_kwargs=[activation=silu]
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

import torch
from harness import QuicktrainJob, compare, quicktrain_job, ratios, spread, step_parser

from quicktrain.config import Config, parse_override

RECIPE_FILE = Path(__file__).resolve().parents[1] / "configs" / "speedrun_muon_cifar10.yaml"


# techniques keys the harness sets from the benchmark's own options (--amp, --batch): not the recipe's
STEP_OPTIONS = {"techniques.amp", "techniques.micro_batch_size", "techniques.accum_steps"}


def recipe_overrides() -> dict:
    """The recipe's optimizer and techniques sections, read from its config file (so the step
    measured is the recipe's as it stands, not a copy of it), less :data:`STEP_OPTIONS`."""
    cfg = Config.load(RECIPE_FILE)
    settings = {
        f"{section}.{key}": value
        for section in ("optim", "techniques")
        for key, value in asdict(getattr(cfg, section)).items()
    }
    return {key: value for key, value in settings.items() if key not in STEP_OPTIONS}


def recipe_job(args: argparse.Namespace, low_res: int | None = None, **overrides) -> QuicktrainJob:
    """The recipe's step (:func:`recipe_overrides` plus ``overrides``, dotted keys) from
    ``step_parser``'s options, at full size or, with ``low_res``, at a progressive-resizing
    epoch's size; its first epoch started (the harness's engine has no epoch handler)."""
    settings = {**recipe_overrides(), **overrides}
    if low_res:
        settings |= {"data.low_res": low_res, "data.low_res_epochs": 10**6}
    job = quicktrain_job(args.model, args.amp, args.batch, args.steps, overrides=settings)
    job.state.techniques.start_epoch(0)
    return job


def switch_ab(args: argparse.Namespace, switch: str) -> None:
    """The recipe's step with the boolean ``switch`` off and on: :func:`variant_ab`."""
    variant_ab(args, switch.rsplit(".", 1)[-1], {switch: True}, {switch: False})


def variant_ab(args: argparse.Namespace, name: str, on: dict, off: dict | None = None) -> None:
    """The recipe's whole step (the Ignite Engine running ``train_step``) as it stands (or with
    ``off``) and with the overrides ``on``, at full size and at the recipe's 24 px epochs,
    interleaved; ratios trial by trial."""
    for label, low_res in (("32 px", None), ("24 px", 24)):
        sides = []
        for side_name, overrides in (("off", off or {}), (name, on)):
            job = recipe_job(args, low_res, **overrides)
            job.side.name = side_name
            sides.append(job.side)
        results = compare(sides, repeats=args.repeats)
        print(f"{args.model}, the Muon recipe's step at {label}, batch {args.batch}, {args.steps} updates per trial:")
        for side_name, ips in results.items():
            print(f"  {side_name:12s} {spread(ips, ' img/s')}")
        print(f"  {name} on / off throughput: {spread(ratios(results, name, 'off'))}")


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--name", default="variant", help="the variant's name in the output [variant]")
    parser.add_argument(
        "--set",
        action="append",
        required=True,
        metavar="KEY=VALUE",
        help="a config override the variant makes (values read as YAML), e.g. model.model_kwargs=[activation=silu]; "
        "repeatable",
    )
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    variant_ab(args, args.name, dict(parse_override(item) for item in args.set))


if __name__ == "__main__":
    main()
