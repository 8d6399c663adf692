"""quicktrain's speedrun recipe against a published airbench speedrun (``--peer``: airbench94 from
PyPI, or airbench94_muon.py of cifar10-airbench f1c599c; how each runs and what a CPU changes:
``airbench_peers.py``) on the same data, in one run, seeds interleaved, each timed to the same
accuracy: the accuracy the peer reaches there (its median over the seeds, with its test-time
augmentation).

- airbench: ``airbench.train94`` on the data written in its own format (``cifar10/train.pt``,
  ``test.pt`` in a work folder), then its TTA evaluation; its time = training (whitening
  initialisation included, as airbench times it) + that evaluation.
- quicktrain: ``configs/speedrun_cifar10.yaml`` in a fresh process, evaluated (with the same
  TTA) every ``--eval-every-steps`` updates; its time to the target = training time until the
  first evaluation at or above airbench's median accuracy + that evaluation's TTA time.
- airbench94_muon: its own ``main`` and its own timer (whitening + training + TTA evaluation).
- On a GPU the peer runs as published (fp16, CUDA events, its compile and warm-up). On a CPU
  its CUDA calls are redirected to the CPU, its forward runs under bf16 autocast and nothing is
  compiled (``--device cpu``): the closest CPU analogue of its fp16 GPU recipe.
  ``--airbench-allocator retain`` runs it with glibc keeping freed memory, as quicktrain's
  ``--cpu-allocator retain`` does: what that setting alone is worth to the peer (not how it is
  published).
- Each seed is a pair (airbench, then quicktrain, back to back on one machine), saved to
  ``WORK/pairs/sN.json`` with the machine it ran on as soon as both sides finish. A rerun with
  the same settings, commit and hardware (CPU model and count, GPU) keeps the saved pairs and
  runs only the missing ones, so the seeds of one comparison can span sessions: the time ratio
  is taken within each pair, never across them. ``--fresh`` runs every pair again.

    pip download --no-deps airbench==0.1.8 && pip install airbench-0.1.8.tar.gz   # once
    python benchmarks/vs_airbench.py --data ../shared/datasets/cifar10-jpeg --seeds 3 --json out.json
    python benchmarks/vs_airbench.py --config configs/speedrun_muon_cifar10.yaml --seeds 3   # another recipe
    python benchmarks/vs_airbench.py --peer airbench94_muon --peer-script cifar10-airbench/airbench94_muon.py \
        --config configs/speedrun_muon_cifar10.yaml --airbench-allocator retain --seeds 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from airbench_peers import PEERS, make_peer
from harness import spread

from quicktrain.atomic import atomic_write

REPO = Path(__file__).resolve().parents[1]


def write_airbench_data(data: str, work: Path, max_train: int | None) -> None:
    """The image folder decoded by quicktrain, saved in airbench's format."""
    from quicktrain.config import DataConfig
    from quicktrain.data.sources import load_arrays

    arrays = load_arrays(DataConfig(dataset=f"imagefolder:{data}", max_train_samples=max_train, data_mode="memory"))
    folder = work / "cifar10"
    folder.mkdir(parents=True, exist_ok=True)
    for name, split in (("train", arrays.train), ("test", arrays.test)):
        payload = {"images": torch.from_numpy(split.images), "labels": torch.from_numpy(split.labels)}
        torch.save({**payload, "classes": list(arrays.classes)}, folder / f"{name}.pt")


def run_quicktrain(args: argparse.Namespace, seed: int, out: Path) -> list[dict]:
    command = [sys.executable, "-m", "quicktrain", "train", "--config", str((REPO / args.config).resolve()),
               "--dataset", f"imagefolder:{Path(args.data).resolve()}", "--seed", str(seed), "--device", args.device,
               "--eval-every-steps", str(args.eval_every_steps), "--tta", "flip_translate", "--no-progress",
               "--no-tensorboard", "--out", str(out)]  # fmt: skip
    if args.max_train_samples:
        command += ["--max-train-samples", str(args.max_train_samples)]
    if args.compile:
        command += ["techniques.compile=true"]
    if args.quicktrain_epochs:
        command += ["--epochs", str(args.quicktrain_epochs)]
    command += shlex.split(args.quicktrain_args)
    shutil.rmtree(out, ignore_errors=True)  # a pair is always trained afresh, never resumed
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"quicktrain seed {seed} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return [json.loads(line) for line in (out / "evals.jsonl").read_text().splitlines() if line.strip()]


def time_to(evals: list[dict], target: float) -> dict[str, float] | None:
    """The first evaluation at or above ``target``: training time, and with its TTA evaluation."""
    for row in evals:
        if row["test_accuracy"] >= target:
            return {"train_s": row["train_time_s"], "time_s": row["train_time_s"] + row["test_eval_time_s"]}
    return None


def settings(args: argparse.Namespace) -> dict:
    """What a saved pair must have been run with to be kept."""
    keys = ("config", "quicktrain_args", "max_train_samples", "airbench_epochs", "quicktrain_epochs",
            "eval_every_steps", "device", "compile")  # fmt: skip
    recipe = hashlib.sha256((REPO / args.config).read_bytes()).hexdigest()[:16]  # its content, not just its name
    where = machine(args.device)  # the ratio differs between CPU models: pairs from two are not pooled
    hardware = f"{where['cpu']} x{where['cpu_count']}" + (f", {where['gpu']}" if "gpu" in where else "")
    fixed = {"data": str(Path(args.data).resolve()), "config_sha256": recipe, "commit": commit(), "hardware": hardware}
    chosen = {key: getattr(args, key) for key in keys} | args.peer_runner.settings()
    if args.airbench_allocator != "system":  # only when asked: pairs saved before the option stay comparable
        chosen["airbench_allocator"] = args.airbench_allocator
    return fixed | chosen


def git(*command: str) -> str:
    """git's answer, or "" where there is no git or no repository (a copied tree on a GPU machine)."""
    try:
        return subprocess.run(["git", *command], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        return ""


def commit() -> str:
    """The commit measured, marked when tracked files differ from it (``QUICKTRAIN_COMMIT`` names
    it where the tree was copied without its repository)."""
    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return os.environ.get("QUICKTRAIN_COMMIT", "unknown")
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def machine(device: str) -> dict:
    """Where and when a pair was taken: the hardware as a run record's env.json names it."""
    from quicktrain.engine.environment import environment

    env = environment(torch.device(device))
    keys = ("cpu", "cpu_model", "cpu_features", "cpu_count", "cpu_capability", "torch_threads", "torch", "gpu")
    boot = Path("/proc/sys/kernel/random/boot_id")
    return {key: env[key] for key in keys if key in env} | {
        "host": platform.node(),
        "boot": boot.read_text().strip() if boot.exists() else "",
        "taken": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def load_pair(path: Path, wanted: dict) -> dict | None:
    if not path.exists():
        return None
    pair = json.loads(path.read_text())
    if pair["settings"] != wanted:
        changed = sorted(k for k in wanted if pair["settings"].get(k) != wanted[k])
        raise SystemExit(
            f"vs_airbench: {path} was taken with other settings ({', '.join(changed)}); "
            "use another --work folder, or --fresh to run every pair again"
        )
    return pair


def run_pair(args: argparse.Namespace, seed: int, wanted: dict) -> dict:
    air = args.peer_runner.run(args.work, seed, args.device == "cpu", args.airbench_epochs)
    print(f"seed {seed} {args.peer}: test acc {air['accuracy']:.4f} in {air['time_s']:.1f}s", flush=True)
    evals = run_quicktrain(args, seed, args.work / f"quicktrain-s{seed}")
    where = machine(args.device)
    pair = {"seed": seed, "settings": wanted, "machine": where, "airbench": air, "quicktrain_evals": evals}
    path = args.work / "pairs" / f"s{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: f.write((json.dumps(pair, indent=1) + "\n").encode()))
    return pair


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/datasets/cifar10-jpeg", help="imagefolder (train/, test/)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--eval-every-steps", type=int, default=20, help="quicktrain's evaluation cadence (updates)")
    parser.add_argument("--compile", action="store_true", help="quicktrain with torch.compile (GPU)")
    parser.add_argument("--work", type=Path, default=Path("runs/vs-airbench"))
    parser.add_argument("--max-train-samples", type=int, help="a class-balanced subset, for a smoke run")
    parser.add_argument("--airbench-epochs", type=float, help="override airbench's 9.9 epochs (smoke runs)")
    parser.add_argument("--quicktrain-epochs", type=int, help="override the recipe's 9 epochs (smoke runs)")
    parser.add_argument("--config", default="configs/speedrun_cifar10.yaml", help="quicktrain's recipe (YAML)")
    parser.add_argument(
        "--quicktrain-args",
        default="",
        help="more flags/overrides for quicktrain's side, e.g. '--optimizer muon --low-res 24 --low-res-epochs 3'",
    )
    parser.add_argument(
        "--airbench-allocator",
        default="system",
        choices=["system", "retain"],
        help="CPU: run airbench94 with glibc told to keep freed memory, as quicktrain's --cpu-allocator retain does "
        "(a reading of what the allocator alone is worth; airbench as published runs with glibc's default)",
    )
    parser.add_argument("--fresh", action="store_true", help="run every seed's pair again, even those saved in --work")
    parser.add_argument(
        "--peer",
        default="airbench94",
        choices=sorted(PEERS),
        help="the published speedrun to time against (airbench_peers.py)",
    )
    parser.add_argument(
        "--peer-script", type=Path,
        help="the peer's script: airbench94_muon.py (cifar10-airbench f1c599c), cifar10_speedrun.py (hiverge 5cd49b1)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.peer_runner = make_peer(args.peer, args.peer_script)
    peer = args.peer
    args.work.mkdir(parents=True, exist_ok=True)
    wanted = settings(args)
    saved = {
        seed: None if args.fresh else load_pair(args.work / "pairs" / f"s{seed}.json", wanted)
        for seed in range(args.seeds)
    }
    if any(pair is None for pair in saved.values()):
        write_airbench_data(args.data, args.work, args.max_train_samples)
    if args.airbench_allocator == "retain":  # this process runs airbench; quicktrain's runs are processes of their own
        from quicktrain.techniques.cpu.allocator import resolve_host_allocator

        allocator = resolve_host_allocator("retain", torch.device(args.device))
        if not allocator.apply():
            raise SystemExit(f"vs_airbench: --airbench-allocator retain: {allocator.note or 'glibc refused'}")
    if args.device == "cuda" and any(pair is None for pair in saved.values()):
        args.peer_runner.warm(args.work, cpu=False)
    pairs = []
    for seed, pair in saved.items():  # interleaved: peer, quicktrain, peer, ...
        if pair is None:
            pair = run_pair(args, seed, wanted)
        else:
            where = pair["machine"]
            print(f"seed {seed}: saved pair kept ({peer} {pair['airbench']['accuracy']:.4f}; "
                  f"taken {where['taken']} on {where['cpu']})", flush=True)  # fmt: skip
        pairs.append(pair)
    air = [pair["airbench"] for pair in pairs]
    quick = [pair["quicktrain_evals"] for pair in pairs]
    machines = {(pair["machine"]["host"], pair["machine"].get("boot")) for pair in pairs}
    if len(machines) > 1:
        print(f"pairs taken on {len(machines)} machines (or boots): compare the ratios, not times across pairs")
    target = statistics.median(a["accuracy"] for a in air)
    reached = [time_to(evals, target) for evals in quick]
    finals = [evals[-1]["test_accuracy"] for evals in quick]
    print(f"\ntarget: {peer}'s median test accuracy with TTA, {target:.4f}")
    print(f"{peer}: {spread([a['time_s'] for a in air], ' s')} (training {spread([a['train_s'] for a in air], ' s')})")
    if all(r is not None for r in reached):
        times = [r["time_s"] for r in reached]
        ratios = [q / a["time_s"] for q, a in zip(times, air)]
        print(f"quicktrain to the target: {spread(times, ' s')}; final accuracy {spread(finals)}")
        print(f"time ratio quicktrain / {peer} (paired by seed): {spread(ratios)}")
    else:
        count = sum(r is not None for r in reached)
        print(f"quicktrain reached {target:.4f} in {count} of {len(reached)} seeds: no ratio to the target")
    whole = [{"train_s": evals[-1]["train_time_s"], "time_s": evals[-1]["train_time_s"] + evals[-1]["test_eval_time_s"]}
             for evals in quick]  # fmt: skip
    print(
        f"quicktrain's whole run: {spread([w['time_s'] for w in whole], ' s')} with its last TTA evaluation, "
        f"ratio to {peer} {spread([w['time_s'] / a['time_s'] for w, a in zip(whole, air)])}; "
        f"final accuracy {spread(finals)}"
    )
    if args.json:
        result = {
            "peer": peer,
            "target": target,
            "airbench": air,
            "quicktrain_to_target": reached,
            "quicktrain_final": finals,
            "quicktrain_whole_run": whole,
            "machines": [pair["machine"] for pair in pairs],
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
