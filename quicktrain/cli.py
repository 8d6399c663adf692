"""Command line: parse, build a config, call the library. Nothing imports this module.

Every config key is also a flag (``optim.lr`` -> ``--lr``, ``model.name`` -> ``--model``),
generated from the config tree so the two never drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from quicktrain.cli_timm import ALIASES, DIFFERS, add_timm_flags, apply_experiment, bare_kwargs
from quicktrain.config import Config, DataConfig, RunConfig, parse_override, smoke
from quicktrain.errors import ConfigError, QuicktrainError
from quicktrain.logs import one_line, setup_logging


def _flag(key: str) -> str:
    return "--model" if key == "model.name" else "--" + key.split(".")[1].replace("_", "-")


def _converter(key: str, tp: Any) -> tuple[Any, dict[str, Any]]:
    """argparse type/choices for a config field's annotation."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [t for t in typing.get_args(tp) if t is not type(None)]
        words = [w for t in inner if typing.get_origin(t) is Literal for w in typing.get_args(t)]  # e.g. "auto"
        convert, extra = _converter(key, inner[0])

        def union(text: str) -> Any:
            if text.lower() in ("none", "null"):
                return None
            return text if text in words else convert(text)

        union.__name__ = " or ".join([getattr(inner[0], "__name__", "value"), *words])  # argparse's "invalid X value"
        return union, extra
    if origin is Literal:
        return str, {"choices": typing.get_args(tp)}
    if origin is list:
        return typing.get_args(tp)[0], {"nargs": "+"}
    return tp, {}


def _add_config_flags(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    for section in dataclasses.fields(Config):
        cls = typing.get_type_hints(Config)[section.name]
        group = parser.add_argument_group(f"{section.name} options")
        hints = typing.get_type_hints(cls)
        for leaf in dataclasses.fields(cls):
            key = f"{section.name}.{leaf.name}"
            if key in skip:
                continue
            tp = hints[leaf.name]
            text = leaf.metadata["help"].replace("%", "%%")  # argparse formats help with %
            kwargs: dict[str, Any] = {"dest": key, "default": argparse.SUPPRESS, "help": text}
            if tp is bool:
                kwargs["action"] = argparse.BooleanOptionalAction
            elif key == "run.resume":  # a bare --resume is what people type: the newest checkpoint
                kwargs.update(nargs="?", const="auto", metavar="CHECKPOINT|auto")
            elif key == "run.mlflow":  # bare --mlflow: a local file store
                kwargs.update(nargs="?", const="mlruns", metavar="URI")
            else:
                convert, extra = _converter(key, tp)
                kwargs.update(type=convert, metavar=leaf.name.upper(), **extra, **bare_kwargs(key))
                if key == "model.model_kwargs":  # repeated, and with timm's --drop: added up
                    kwargs["action"] = "extend"
            default = leaf.default if leaf.default is not dataclasses.MISSING else leaf.default_factory()
            if isinstance(default, list):
                default = " ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in default)
            kwargs["help"] += f" [{key}, default: {default}]" + (f"; timm: {DIFFERS[key]}" if key in DIFFERS else "")
            group.add_argument(_flag(key), *ALIASES.get(key, ()), **kwargs)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # --drop is never --drop-path, --data is never --data-dir
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> typing.NoReturn:
        # one line, as every other input error: the usage block hides the message
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="quicktrain",
        description="Fast image-classification training with gradient accumulation, mixed precision, "
        "pinned memory, channels-last and torch.compile; every run writes a self-describing record.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = sub.add_parser(
        "train",
        help="train a model and write a run record",
        description="Train a model. With no options: resnet18 on the bundled CIFAR-10 sample, offline. "
        "Settings come from the defaults, then --config, then KEY=VALUE overrides, then flags. timm train.py's "
        "flags mean what they mean there or are refused naming ours (docs/training.md); no flag is abbreviated.",
        epilog="example: quicktrain train --model vit_tiny --dataset cifar10 --data-dir data --download "
        "--batch-size 512 --micro-batch-size 128 --amp bf16 --epochs 10",
    )
    train.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. optim.lr=0.05")
    train.add_argument("--config", help="YAML preset, e.g. configs/quickstart.yaml")
    train.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    train.add_argument(
        "--techniques",
        choices=["auto"],
        help="auto: run 'quicktrain autotune' (off/bf16/fp16, channels-last, loader) first and train with the fastest",
    )
    train.add_argument(
        "--smoke",
        action="store_true",
        help="check a preset on CPU: same model, image size and optimizer, one update on 4 generated images "
        "(no downloads)",
    )
    train.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    _add_config_flags(train)
    add_timm_flags(train)
    _add_ablate_parser(sub)
    _add_report_parser(sub)
    _add_tune_parser(sub)
    _add_autotune_parser(sub)
    _add_inference_parsers(sub)
    models = sub.add_parser(
        "models",
        help="list the models in the registry (or timm's, with --timm)",
        description="The registered models. Any timm architecture trains as --model timm:NAME, and your own "
        "factory as --model path/to/file.py:make or --model package.module:make (make(num_classes, image_size) "
        "returns an nn.Module).",
    )
    models.add_argument("--all", action="store_true", help="include the tiny test_* models")
    models.add_argument("--timm", metavar="PATTERN", help="list timm architectures matching PATTERN, e.g. 'convnext*'")
    models.add_argument("--pretrained", action="store_true", help="with --timm: only those with ImageNet weights")
    return parser


def _add_ablate_parser(sub: Any) -> None:
    from quicktrain.experiments.grid import DESIGNS
    from quicktrain.techniques.registry import arm_names, study_names

    ablate = sub.add_parser(
        "ablate",
        help="train every combination of speed techniques and record each run",
        description="Run every subset of --techniques (2^n arms, baseline = none; --design single: the "
        "baseline and each one alone, n+1 arms) for each model, dataset and repeat, each in a fresh process, "
        "interleaved across repeats. Only the techniques under test differ between arms: effective batch, "
        "updates, schedule, seed and data order stay fixed. Re-running the same command continues where it "
        "stopped. Other flags set the shared training job. With --target-accuracy each arm trains until it "
        "reaches the target (or --epochs / --max-time) and the report compares times to the target "
        "(--no-stop-at-target: train on, recording the time it was reached); --eval-every-steps N gives that "
        "time update resolution.",
        epilog="example: quicktrain ablate --techniques amp,ga,channels_last --models resnet18,vit_tiny "
        "--dataset imagefolder:../shared/datasets/cifar10-jpeg --max-train-samples 1000 --epochs 2 "
        "--repeats 3 --out runs/ablation && quicktrain report runs/ablation",
    )
    ablate.add_argument(
        "--techniques",
        default=",".join(study_names()),
        help=f"comma-separated, from {', '.join(arm_names())} [default: {','.join(study_names())}]. amp: the "
        "best precision for the hardware (bf16 on CPU); ga: --accum-steps micro-batches per update",
    )
    ablate.add_argument(
        "--switch",
        action="append",
        default=[],
        metavar="NAME=KEY=VALUE[,...][/KEY=VALUE,...]",
        help="define a recipe ingredient --techniques can name: the overrides that turn it on (and after '/' "
        "those that turn it off; default: the base config's values), e.g. --switch muon=optim.optimizer=muon "
        "--switch lowres=data.low_res=24,data.low_res_epochs=3; repeatable",
    )
    ablate.add_argument(
        "--design",
        choices=DESIGNS,
        default="factorial",
        help="factorial: every subset of --techniques (2^n arms); single: the baseline and each technique alone "
        "(n+1 arms). To take a recipe apart, make it the base config (--config) and define switches that each take "
        "one ingredient out, e.g. --switch no_lookahead=optim.lookahead=null [factorial]",
    )
    ablate.add_argument("--models", help="comma-separated models [default: --model, else resnet18]")
    ablate.add_argument("--datasets", help="comma-separated datasets [default: --dataset, else sample]")
    ablate.add_argument("--repeats", type=int, default=3, help="runs per arm, seeds --seed, --seed+1, ... [3]")
    ablate.add_argument("--accum-steps", type=int, default=4, help="micro-batches per update in 'ga' arms [4]")
    ablate.add_argument("--out", default="runs/ablation", help="grid folder [runs/ablation]")
    ablate.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_job_options(ablate, "arm", skip=("techniques.accum_steps", "techniques.micro_batch_size"))


def _add_inference_parsers(sub: Any) -> None:
    evaluate = _run_command(
        sub,
        "evaluate",
        help="evaluate a trained run on a dataset's held-out split",
        description="Accuracy, macro-F1, top-5 (more than 5 classes), per-class precision/recall/F1 and a "
        "confusion-matrix plot of a trained run's model on a dataset's test split, with the run's image size, "
        "normalisation and test-time augmentation. Writes evaluation.json, evaluation.md and confusion.png.",
        epilog="example: quicktrain evaluate runs/my-run --dataset imagefolder:../shared/datasets/cifar10-jpeg",
    )
    evaluate.add_argument("--dataset", required=True, help="as in train, e.g. imagefolder:PATH or cifar10")
    evaluate.add_argument("--max-test-samples", type=int, help="a class-balanced subset of the test split")
    evaluate.add_argument("--out", type=Path, help="output folder [RUN/evaluation-DATASET]")
    evaluate.add_argument(
        "--device", default="auto", help="auto (the GPU if there is one, as train), cpu, cuda or cuda:N [auto]"
    )
    evaluate.add_argument(
        "--tta",
        choices=typing.get_args(typing.get_type_hints(RunConfig)["tta"]),  # the config's own choices
        help="test-time augmentation instead of the run's own (off: 1 view, flip: 2, flip_translate: 6); "
        "the time it took is in evaluation.json",
    )
    evaluate.add_argument(
        "--tta-fraction",
        type=float,
        metavar="F",
        help="the share of each batch, least confident first, that gets the TTA views instead of the run's own "
        "(e.g. 0.2; 1: every image)",
    )
    predict = _run_command(
        sub,
        "predict",
        help="predict labels and probabilities for image files or folders",
        description="Classify image files (or every image under folders) with a trained run's model; writes a CSV "
        "of path, label, probability and one probability column per class.",
        epilog="example: quicktrain predict runs/my-run photos/ --out predictions.csv",
    )
    predict.add_argument("paths", nargs="+", help="image files or folders")
    predict.add_argument("--out", type=Path, default=Path("predictions.csv"), help="CSV file [predictions.csv]")
    predict.add_argument("--batch-size", type=int, default=256, help="images per forward pass [256]")
    predict.add_argument(
        "--device", default="auto", help="auto (the GPU if there is one, as train), cpu, cuda or cuda:N [auto]"
    )
    predict.add_argument("--no-progress", action="store_true", help="no progress bar")
    for parser in (evaluate, predict):
        parser.add_argument(
            "--max-image-pixels",
            type=int,
            metavar="N",
            help="refuse image files that declare more pixels than this [178,956,970: Pillow's decompression-bomb "
            "guard]; raise it for real gigapixel scans",
        )
    export = _run_command(
        sub,
        "export",
        help="export a trained run's model (onnx, pt2, torchscript, safetensors), checked against PyTorch",
        description="Write the model in FORMAT, load the export back and compare its outputs with the PyTorch "
        "model's on a few inputs (fails if they differ). The preprocessing (mean, std, image size, class names, "
        "channel order) is written beside it as FILE.json, and into an ONNX file's metadata; an ONNX file holds "
        "its weights (external data only past 2 GB).",
        epilog="example: quicktrain export runs/my-run --format onnx --uint8-input",
    )
    export.add_argument(
        "--format",
        required=True,
        help="onnx (one file, checked in onnxruntime: pip install 'quicktrain[export]'), pt2 (torch.export), "
        "torchscript or safetensors",
    )
    export.add_argument(
        "--out", type=Path, help="file [RUN/model.onnx, model.pt2, model.torchscript.pt or model.safetensors]"
    )
    export.add_argument(
        "--uint8-input",
        action="store_true",
        help="bake normalisation (and the run's resize) into the graph: it takes (N, H, W, 3) uint8 RGB images",
    )


def _run_command(sub: Any, name: str, **texts: str) -> argparse.ArgumentParser:
    """A command that works on a trained run: its folder (or a weights file in it) and --weights."""
    parser = sub.add_parser(name, **texts)
    parser.add_argument(
        "run", type=Path, help="a run folder (config.yaml, summary.json, model.pt), or a weights file in one"
    )
    parser.add_argument("--weights", default="model.pt", help="model.pt (final) or best.pt [model.pt]")
    parser.add_argument(
        "--trust-code",
        action="store_true",
        help="import the model factory file the run's config names even when it lies inside the run folder or "
        "differs from the one the run recorded (code from a folder someone sent you runs with your rights)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    return parser


def _add_job_options(parser: argparse.ArgumentParser, each: str, skip: tuple[str, ...]) -> None:
    """The training job that every run of a many-run command shares: preset, overrides, flags.
    Where runs go and whether they resume is the command's business, so those flags are left out."""
    parser.add_argument("--config", help="YAML preset for the shared training job")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help=f"config overrides for every {each}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    _add_config_flags(parser, skip=("run.out", "run.resume", "run.progress", *skip))


def _add_report_parser(sub: Any) -> None:
    report = sub.add_parser(
        "report",
        help="summarise run records (an ablation or any runs) into report.md and plots",
        description="Read every run record under DIR (folders with summary.json) and write report.md, "
        "speedup.png, tradeoff.png and curves.png. Runs are grouped by model, dataset and technique "
        "combination; speed-ups are against the combination with no techniques, paired by seed.",
    )
    report.add_argument("dir", type=Path, help="folder holding run records, e.g. an ablation's --out")
    report.add_argument("--out", type=Path, help="where to write report.md and the plots [DIR]")
    report.add_argument(
        "--tolerance",
        type=float,
        default=0.01,
        help="accuracy drop (absolute) still counted as 'no loss' in the findings [0.01]",
    )
    report.add_argument("--debug", action="store_true", help="show tracebacks for errors")


def _add_tune_parser(sub: Any) -> None:
    tune = sub.add_parser(
        "tune",
        help="tune lr, optimizer, weight decay and clipping with Optuna on a validation split",
        description="An Optuna study whose trials are training runs scored on a class-balanced validation "
        "split carved out of the training set (--val-fraction, default 0.1); the test split is never loaded. "
        "Per-epoch validation scores drive pruning. The study is stored in --storage (default "
        "sqlite:///OUT/study.db): the same command continues a killed study, and workers on several machines "
        "given one RDB URL (e.g. postgresql://user:pw@host/db) share it. Writes every trial's run record, "
        "trials.csv, best.yaml (for quicktrain train --config), history.png and importances.png.",
        epilog="example: quicktrain tune --config configs/quickstart.yaml --epochs 3 --trials 20 --out runs/tune "
        "&& quicktrain train --config runs/tune/best.yaml",
    )
    tune.add_argument("--trials", type=int, default=20, help="finished trials the study should reach [20]")
    tune.add_argument("--study", default="quicktrain", help="study name in the storage [quicktrain]")
    tune.add_argument("--storage", help="Optuna storage URL [sqlite:///OUT/study.db]")
    tune.add_argument("--out", default="runs/tune", help="folder for trial records and outputs [runs/tune]")
    tune.add_argument("--metric", default="accuracy", help="objective: accuracy or f1_macro on validation [accuracy]")
    tune.add_argument("--pruner", default="median", help="median, halving (successive halving) or none [median]")
    tune.add_argument(
        "--space",
        help="YAML search space (config key -> {type, low, high, log, zero, off, choices}) [lr, optimizer, "
        "weight decay incl. 0, grad clip incl. off]",
    )
    _add_job_options(tune, "trial", skip=("run.target_accuracy", "data.load_test"))


def _add_autotune_parser(sub: Any) -> None:
    from quicktrain.techniques.registry import specs

    autotune = sub.add_parser(
        "autotune",
        help="time AMP, channels-last, compile and loader choices on this machine; write the fastest as a config",
        description="Build the real model and step for every combination of AMP (off, bf16 where native, fp16 on "
        "CUDA), channels-last, loader (torch, device) and torch.compile (CUDA, or --with-compile), time a few "
        "warm updates of each (interleaved, repeated), and write the base config with the fastest combination to "
        "--out, with the measured table as a comment. Ties within --tolerance keep the simpler setting.",
        epilog="example: quicktrain autotune --model efficientnet_b0 --batch-size 128 --out tuned.yaml && "
        "quicktrain train --config tuned.yaml",
    )
    autotune.add_argument("--out", help="config file to write [runs/autotune-MODEL.yaml]")
    autotune.add_argument("--json", type=Path, help="also write the measured table as JSON")
    autotune.add_argument("--repeats", type=int, default=3, help="timed trials per candidate [3]")
    autotune.add_argument("--steps", type=int, default=3, help="updates per timed trial [3]")
    autotune.add_argument("--warmup", type=int, default=2, help="untimed updates first [2]")
    autotune.add_argument(
        "--tolerance", type=float, default=0.03, help="ties within this fraction keep the simpler [0.03]"
    )
    autotune.add_argument("--with-compile", action="store_true", help="also try torch.compile on a CPU (minutes each)")
    tunable = ",".join(s.name for s in specs() if s.tune is not None)
    autotune.add_argument(
        "--switches",
        default=tunable,
        help=f"which techniques to combine (the others keep the config's value, e.g. --amp bf16) [{tunable}]",
    )
    _add_job_options(autotune, "candidate", skip=())


def config_from_args(args: argparse.Namespace) -> Config:
    overrides = dict(parse_override(item) for item in args.overrides)
    overrides.update({k: v for k, v in vars(args).items() if "." in k})  # the flags given
    apply_experiment(overrides, getattr(args, "_experiment", None))
    preset = args.config or _resumed_config(overrides)
    cfg = Config.load(preset, overrides) if preset else Config.from_overrides(overrides)
    return _data_dir_alone(cfg, overrides)


def _data_dir_alone(cfg: Config, overrides: dict[str, Any]) -> Config:
    """``--data-dir PATH`` is read by cifar10/cifar100; given without a dataset it means what it
    means in timm (an image folder), and with any other dataset it is refused, never ignored."""
    if "data.data_dir" not in overrides or cfg.data.dataset in ("cifar10", "cifar100"):
        return cfg
    path = overrides["data.data_dir"]
    if "data.dataset" in overrides or cfg.data.dataset != "sample":
        raise ConfigError(
            f"--data-dir {path} is read by cifar10/cifar100 only, not by --dataset {cfg.data.dataset}; for a folder "
            "of images use --dataset imagefolder:PATH"
        )
    print(f"--data-dir {path} without --dataset: training on --dataset imagefolder:{path} (timm's meaning)")
    unread = DataConfig.__dataclass_fields__["data_dir"].default  # back to its default: nothing reads it
    return Config.from_overrides({"data.dataset": f"imagefolder:{path}", "data.data_dir": unread}, base=cfg)


def _resumed_config(overrides: dict[str, Any]) -> Path | None:
    """When resuming without --config, start from the run's own config.yaml, so only the
    options given now (e.g. more workers) differ from the interrupted run."""
    from quicktrain.engine.checkpoint import resume_folder

    resume = overrides.get("run.resume")
    folder = resume_folder(resume, overrides.get("run.out")) if resume else None
    saved = folder / "config.yaml" if folder else None
    return saved if saved is not None and saved.is_file() else None


def _cmd_train(args: argparse.Namespace) -> int:
    from quicktrain.engine import train
    from quicktrain.engine.summary import input_bound_advice
    from quicktrain.reporting import format_table

    cfg = config_from_args(args)
    if args.smoke:
        cfg = smoke(cfg)
    if args.techniques == "auto":
        from quicktrain.experiments.autotune import TABLE_COLUMNS, autotune, candidates

        tuned = autotune(cfg, candidates(_device_of(cfg), with_compile=False))
        print(format_table(tuned.table(), TABLE_COLUMNS) + f"\n{tuned.verdict()}\n")
        cfg = tuned.config
    if args.print_config:
        print(cfg.to_yaml(), end="")
        return 0
    try:
        result = train(cfg)
    except KeyboardInterrupt:
        return 130  # the trainer has said how to resume
    s = result.summary
    if not result.main:
        return 0  # rank 0 reports for every process
    if s["status"] == "interrupted":  # SIGTERM/SIGINT: a checkpoint was written first
        print(f"interrupted ({s['error']}); continue with: quicktrain train --out {result.folder} --resume auto")
        return 0 if s["error"].startswith("SIGTERM") else 130
    splits = [split for split in ("val", "test") if s.get(f"{split}_accuracy") is not None]
    scores = [f"{split}_{m}" for split in splits for m in ("loss", "accuracy", "f1_macro")]
    print()
    print(format_table(result.history, ["epoch", "train_loss", *scores, "epoch_time_s", "images_per_s"]))
    said = ", ".join(
        f"{split} accuracy {s[f'{split}_accuracy']:.4f}, macro-F1 {s[f'{split}_f1_macro']:.4f}" for split in splits
    )
    print(
        f"\n{s['model']} on {s['dataset']}: {said or 'no evaluation'}, "
        f"training {s['train_time_s']:.1f}s ({s['images_per_s']:.0f} img/s), "
        f"wall {s['wall_time_s']:.1f}s, {s['optimizer_updates']} updates"
    )
    advice = input_bound_advice(s, cfg.data.workers)
    if advice:
        print(advice)
    print(f"record: {result.folder}")
    return 0


def _cmd_ablate(args: argparse.Namespace) -> int:
    from quicktrain.experiments.ablation import AblationSpec, run_ablation
    from quicktrain.experiments.grid import parse_switch, parse_techniques

    base = config_from_args(args)
    switches = {sw.name: sw for sw in map(parse_switch, args.switch)}
    techniques = parse_techniques(args.techniques, switches)
    unused = [name for name in switches if name not in techniques]
    if unused:
        raise ConfigError(f"--switch {unused[0]} is defined but not named in --techniques '{args.techniques}'")
    if base.run.target_accuracy is not None and "run.stop_at_target" not in vars(args):
        # time to target: each arm trains until it reaches the target or its cap (--epochs, --max-time)
        base = Config.from_overrides({"run.stop_at_target": True}, base)
    spec = AblationSpec(
        techniques=techniques,
        models=_csv_list(args.models, base.model.name),
        datasets=_csv_list(args.datasets, base.data.dataset),
        repeats=args.repeats,
        accum_steps=args.accum_steps,
        base=base,
        out=Path(args.out),
        switches=switches,
        design=args.design,
    )
    try:
        path = run_ablation(spec, argv=args.argv[1:], progress=not args.no_progress)
    except KeyboardInterrupt:
        return 130
    print(f"ablation table: {path}\nreport: quicktrain report {spec.out}")
    return 0


def _csv_list(text: str | None, default: str) -> list[str]:
    return [item.strip() for item in (text or default).split(",") if item.strip()]


def _cmd_report(args: argparse.Namespace) -> int:
    from quicktrain.reporting.report import write_report

    path = write_report(args.dir, args.out, tolerance=args.tolerance)
    print(f"report: {path}")
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from quicktrain.experiments.space import DEFAULT_SPACE, load_space
    from quicktrain.experiments.tune import TuneSpec, run_tune

    spec = TuneSpec(
        base=config_from_args(args),
        trials=args.trials,
        study=args.study,
        storage=args.storage,
        out=Path(args.out),
        space=load_space(args.space) if args.space else DEFAULT_SPACE,
        metric=args.metric,
        pruner=args.pruner,
    )
    spec.check()
    try:
        out = run_tune(spec, argv=args.argv[1:])
    except KeyboardInterrupt:
        print("tune interrupted; run the same command again to continue the study", file=sys.stderr)
        return 130
    print(f"trials: {out / 'trials.csv'}\nbest: {out / 'best.yaml'} (quicktrain train --config {out / 'best.yaml'})")
    return 0


def _cmd_autotune(args: argparse.Namespace) -> int:
    from quicktrain.experiments.autotune import TABLE_COLUMNS, autotune, candidates, write_fragment
    from quicktrain.records import model_slug
    from quicktrain.reporting import format_table

    base = config_from_args(args)
    if min(args.repeats, args.steps, args.warmup) < 1:
        raise ConfigError(
            f"--repeats, --steps and --warmup must be at least 1, got {args.repeats}, {args.steps}, {args.warmup}"
        )
    device = _device_of(base)
    switches = tuple(name.strip() for name in args.switches.split(",") if name.strip())
    result = autotune(
        base,
        candidates(device, args.with_compile, switches, base),
        args.repeats,
        args.warmup,
        args.steps,
        args.tolerance,
    )
    out = Path(args.out or f"runs/autotune-{model_slug(base.model.name)}.yaml")
    write_fragment(result, out, " ".join(["quicktrain", *args.argv]))
    if args.json:
        from quicktrain.atomic import atomic_write_text

        table = {
            "model": base.model.name,
            "batch_size": base.run.batch_size,
            "device": str(device),
            "rows": result.table(),
        }
        atomic_write_text(args.json, json.dumps(table, indent=2) + "\n")
    print(format_table(result.table(), TABLE_COLUMNS))
    print(f"\n{result.verdict()}")
    print(f"chosen: {result.best.name}; config: {out} (quicktrain train --config {out})")
    return 0


def _device_of(cfg: Config) -> Any:
    from quicktrain.engine.setup import resolve_device

    return resolve_device(cfg.run.device)


def _pixel_limit(args: argparse.Namespace) -> None:
    if args.max_image_pixels is not None:
        if args.max_image_pixels < 1:
            raise ConfigError(f"--max-image-pixels must be a positive number of pixels, got {args.max_image_pixels}")
        from quicktrain.data.decode import set_pixel_limit

        set_pixel_limit(args.max_image_pixels)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from quicktrain.inference import evaluate_run, load_run
    from quicktrain.records import dataset_slug

    _pixel_limit(args)
    loaded = load_run(args.run, args.weights, args.device, args.trust_code)
    out = args.out or loaded.folder / f"evaluation-{dataset_slug(args.dataset)}"
    report = evaluate_run(
        loaded, args.dataset, out, args.max_test_samples, tta=args.tta, tta_fraction=args.tta_fraction
    )
    top5 = report["test_top5_accuracy"]
    print(
        f"{loaded.config.model.name} ({loaded.weights.name}) on {args.dataset}: {report['samples']} images, "
        f"accuracy {report['test_accuracy']:.4f}, macro-F1 {report['test_f1_macro']:.4f}"
        + (f", top-5 {top5:.4f}" if top5 is not None else "")
        + f" ({_tta_words(report['tta'], report['tta_fraction'])}, {report['eval_time_s']:.1f} s)"
    )
    print(f"written: {out / 'evaluation.json'}, {out / 'evaluation.md'}, {out / 'confusion.png'}")
    return 0


def _tta_words(tta: str, fraction: float) -> str:
    """e.g. 'no test-time augmentation', 'tta flip on the least confident 20% of each batch'."""
    if tta == "off":
        return "no test-time augmentation"
    return f"tta {tta} on " + ("every image" if fraction >= 1 else f"the least confident {fraction:.0%} of each batch")


def _cmd_predict(args: argparse.Namespace) -> int:
    from quicktrain.inference import image_files, load_run, predict, write_predictions

    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be at least 1, got {args.batch_size}")
    _pixel_limit(args)
    loaded = load_run(args.run, args.weights, args.device, args.trust_code)
    rows = predict(loaded, image_files(args.paths), args.batch_size, progress=not args.no_progress)
    write_predictions(rows, args.out)
    print(f"{len(rows)} images -> {args.out}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from quicktrain.export import EXPORT_SUFFIXES, export
    from quicktrain.inference import load_run

    loaded = load_run(args.run, args.weights, "cpu", args.trust_code)  # exports are built and checked on the CPU
    default = loaded.folder / EXPORT_SUFFIXES.get(args.format, "model")
    checked = export(loaded, args.format, args.out or default, uint8_input=args.uint8_input)
    print(
        f"{checked['format']}: {checked['file']} (outputs on {checked['inputs_checked']} inputs within "
        f"{checked['max_abs_error']:.1e} of the PyTorch model); preprocessing: {checked['preprocessing']}"
    )
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from quicktrain.reporting import format_table

    if args.timm:
        import timm

        names = timm.list_models(args.timm, pretrained=args.pretrained)
        if not names:
            raise ConfigError(
                f"no timm architecture matches --timm {args.timm!r}; try a wildcard, e.g. '*{args.timm}*'"
            )
        print("\n".join(f"timm:{name}" for name in names))
        print(f"\n{len(names)} timm architectures; train one with --model timm:NAME")
        return 0
    from quicktrain.models import list_models

    rows = [{"name": e.name, "description": e.description} for e in list_models(include_test=args.all)]
    print(format_table(rows, ["name", "description"]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # recorded by commands that say how to reproduce them
    setup_logging()
    try:
        commands = {
            "train": _cmd_train,
            "ablate": _cmd_ablate,
            "report": _cmd_report,
            "tune": _cmd_tune,
            "autotune": _cmd_autotune,
            "models": _cmd_models,
            "evaluate": _cmd_evaluate,
            "predict": _cmd_predict,
            "export": _cmd_export,
        }
        return commands[args.command](args)
    except QuicktrainError as err:
        if getattr(args, "debug", False):
            raise
        print(f"quicktrain {args.command}: error: {one_line(err)}", file=sys.stderr)
        return err.exit_status


if __name__ == "__main__":
    sys.exit(main())
