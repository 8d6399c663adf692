"""The published CIFAR-10 speedruns that ``vs_airbench.py`` times quicktrain against, each run as
published on a GPU and, on a CPU, unchanged but for the device. Every change a CPU needs is here
and stated:

- CUDA calls go to the CPU: ``.cuda()`` returns the same tensor or module, ``torch.load`` maps to
  the CPU, ``torch.empty(..., device="cuda")`` allocates on the CPU, ``.pin_memory()`` returns the
  tensor, ``torch.cuda.Event`` times on the host clock, ``torch.cuda.synchronize`` does nothing.
- fp16 becomes bf16 autocast: ``.half()`` keeps the weights in fp32 (a tensor's ``.half()`` gives
  fp32) and the network's forward runs under CPU bf16 autocast with fp32 logits, the closest CPU
  analogue of an fp16 GPU recipe and what quicktrain's recipe runs with.
- No ``torch.compile`` on a CPU (airbench94_muon compiles its Newton-Schulz iteration and its
  network with ``max-autotune``): eager, as quicktrain's side runs there. On a GPU both compile as
  published, with the published warm-up run first.

Peers:

- ``airbench94``: Keller Jordan's ``airbench`` package from PyPI (0.1.8), ``airbench.train94``.
- ``airbench94_muon``: ``airbench94_muon.py`` of KellerJordan/cifar10-airbench at commit f1c599c
  (94.01% in 2.59 s on an A100), given as a file (``--peer-script``): the repository is cloned once
  by whoever runs the benchmark, never vendored here. Its own ``main`` trains (8 epochs, batch
  2000, Muon for the filters, label smoothing 0.2) and its own timer is the time (whitening, the
  training epochs and its TTA evaluation; its per-epoch evaluation without TTA is outside it, as
  quicktrain's periodic evaluations are outside quicktrain's training time).
- ``hiverge``: ``cifar10_speedrun.py`` of hiverge/cifar10-speedrun at 5cd49b1 (94.01% in 2.015 s on
  an A100), given as a file likewise; on a CPU its fp16 weights become fp32 under bf16 autocast as
  above, and its Muon momentum buffers stay fp16 (its own choice of buffer dtype, not a weight).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import io
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch

MUON_COMMIT = "f1c599c"
MUON_SHA256 = "704e29251a5207d8aed8a35adf13f772ff386b90a712aaddc2a28854385b536e"  # its airbench94_muon.py
MUON_FETCH = (
    "git clone https://github.com/KellerJordan/cifar10-airbench && git -C cifar10-airbench checkout "
    f"{MUON_COMMIT}; then --peer-script cifar10-airbench/airbench94_muon.py"
)
HIVERGE_COMMIT = "5cd49b1"
HIVERGE_SHA256 = "d1e1f6991cc3e1758c0bbc0e728c86a4b3119dd42a9233075b2edb9735d0ba91"  # its cifar10_speedrun.py
HIVERGE_FETCH = (
    "git clone https://github.com/hiverge/cifar10-speedrun && git -C cifar10-speedrun checkout "
    f"{HIVERGE_COMMIT}; then --peer-script cifar10-speedrun/cifar10_speedrun.py"
)


class _CpuEvent:
    """torch.cuda.Event's timing interface on the host clock."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, end: _CpuEvent) -> float:
        return 1e3 * (end.t - self.t)


def _no_compile(model=None, **kwargs):
    """``torch.compile`` as an identity, for a bare ``@torch.compile`` and a called one alike."""
    return model if model is not None else (lambda fn: fn)


@contextlib.contextmanager
def patched(patches: dict) -> Iterator[None]:
    saved = {(owner, name): getattr(owner, name) for owner, name in patches}
    try:
        for (owner, name), value in patches.items():
            setattr(owner, name, value)
        yield
    finally:
        for (owner, name), value in saved.items():
            setattr(owner, name, value)


def _cpu_device(device):
    """A factory call's ``device=`` with CUDA replaced by the CPU."""
    return "cpu" if device is not None and torch.device(device).type == "cuda" else device


def on_cpu() -> contextlib.AbstractContextManager:
    """A peer's CUDA calls redirected to the CPU; fp16 casts keep fp32 (its forward runs under
    bf16 autocast instead, see :func:`bf16_forward`)."""
    real_load, real_empty = torch.load, torch.empty
    return patched({
        (torch.Tensor, "cuda"): lambda self, *a, **k: self,
        (torch.Tensor, "pin_memory"): lambda self, *a, **k: self,  # pinning needs a GPU; nothing to pin for
        (torch, "empty"): lambda *a, device=None, **k: real_empty(*a, **k, device=_cpu_device(device)),
        (torch.nn.Module, "cuda"): lambda self, *a, **k: self,
        (torch.nn.Module, "half"): lambda self: self,
        (torch.Tensor, "half"): lambda self, *a, **k: self.float(),
        (torch.cuda, "Event"): _CpuEvent,
        (torch.cuda, "synchronize"): lambda *a, **k: None,
        (torch, "load"): lambda path, *a, **k: real_load(path, map_location="cpu", weights_only=False),
        (torch, "compile"): _no_compile,
    })  # fmt: skip


def bf16_forward(net: torch.nn.Module) -> torch.nn.Module:
    """``net`` with its forward under CPU bf16 autocast (logits back in fp32)."""
    forward = net.forward

    @functools.wraps(forward)
    def autocast_forward(*args, **kwargs):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return forward(*args, **kwargs).float()

    net.forward = autocast_forward
    return net


@contextlib.contextmanager
def in_folder(work: Path) -> Iterator[None]:
    """The peers read ``./cifar10/{train,test}.pt``."""
    here = Path.cwd()
    os.chdir(work)
    try:
        yield
    finally:
        os.chdir(here)


class Airbench94:
    """``airbench.train94`` from PyPI, timed from its training loader in memory (loading the file
    is not timed, as airbench does not time it) to the end of its TTA evaluation."""

    name = "airbench94"

    def settings(self) -> dict:
        return {}  # pairs saved before peers were named stay comparable

    def warm(self, work: Path, cpu: bool) -> None:
        """Its own GPU warm-up (one training run, as its published script runs before its timed
        runs), so cuDNN's algorithm search falls outside seed 0's time. None on a CPU."""
        if cpu:
            return
        import airbench

        with in_folder(work), contextlib.redirect_stdout(sys.stderr):  # its warm-up prints a table row
            airbench.train94(run="warmup", verbose=True)
        torch.cuda.synchronize()

    def run(self, work: Path, seed: int, cpu: bool, epochs: float | None) -> dict[str, float]:
        import airbench
        from airbench.lib_airbench94 import CifarLoader, hyp, make_net94

        with in_folder(work), on_cpu() if cpu else contextlib.nullcontext():
            torch.manual_seed(seed)
            kwargs = {"epochs": epochs} if epochs else {}
            make_net = (lambda: bf16_forward(make_net94())) if cpu else make_net94
            opt = hyp["opt"]  # train94's own loader, built as train94 builds it when given none
            loader = CifarLoader("cifar10", train=True, batch_size=opt["batch_size"], aug=hyp["aug"], altflip=True)
            sync = (lambda: None) if cpu else torch.cuda.synchronize
            sync()
            start = time.perf_counter()
            model = airbench.train94(loader, make_net=make_net, verbose=False, **kwargs)
            sync()
            trained = time.perf_counter()
            test_loader = airbench.CifarLoader("cifar10", train=False, batch_size=2000)
            accuracy = airbench.evaluate(model, test_loader, tta_level=2)
            sync()
            done = time.perf_counter()
        return {"accuracy": float(accuracy), "train_s": trained - start, "tta_eval_s": done - trained,
                "time_s": done - start}  # fmt: skip


def read_table(printed: str, columns: list[str]) -> list[dict[str, str]]:
    """airbench94_muon's printed rows (``|  0  |  1  | ... |``) as dicts by its column names."""
    names = [name.strip() for name in columns]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in printed.splitlines()
            if line.startswith("|")]  # fmt: skip
    table = [dict(zip(names, row)) for row in rows if len(row) == len(names) and row != names]
    if not table:
        raise ValueError(f"airbench94_muon printed no table: {printed[-500:]!r}")
    return table


class ScriptPeer:
    """A published script (a file, checked against the named commit's), imported as a module and
    its ``main(run, model)`` called once per seed with one model built as its ``__main__`` builds
    it. Subclasses name the script and read its result."""

    name = commit = sha256_expected = fetch = ""

    def __init__(self, script: Path | None) -> None:
        if script is None or not Path(script).is_file():
            raise SystemExit(f"vs_airbench: --peer {self.name} needs --peer-script FILE, got {script}: {self.fetch}")
        self.script = Path(script).resolve()
        self.sha256 = hashlib.sha256(self.script.read_bytes()).hexdigest()
        if self.sha256 != self.sha256_expected:
            print(f"vs_airbench: {self.script} is not {self.name}'s script of {self.commit} (sha256 "
                  f"{self.sha256[:16]}); it runs, and its pairs record the difference", file=sys.stderr)  # fmt: skip
        self.module = None
        self.model = None

    def settings(self) -> dict:
        commit = self.commit if self.sha256 == self.sha256_expected else "unknown"
        return {"peer": self.name, "peer_sha256": self.sha256[:16], "peer_commit": commit}

    def _load(self, cpu: bool):
        if self.module is None:
            spec = importlib.util.spec_from_file_location(self.name, self.script)
            module = importlib.util.module_from_spec(spec)
            reads_itself = patched({(sys, "argv"): [str(self.script)]})  # it keeps its own code, as a script
            with reads_itself, on_cpu() if cpu else contextlib.nullcontext():  # its @torch.compile runs at import
                spec.loader.exec_module(module)
            self.module = module
        return self.module

    def _model(self, cpu: bool) -> torch.nn.Module:
        """One network for every seed, as its ``__main__`` re-uses one (``main`` resets it)."""
        if self.model is None:
            module = self._load(cpu)
            with on_cpu() if cpu else contextlib.nullcontext():
                model = module.CifarNet().cuda().to(memory_format=torch.channels_last)
            if cpu:
                model = bf16_forward(model)
            else:
                model.compile(mode="max-autotune")
            self.model = model
        return self.model

    def warm(self, work: Path, cpu: bool) -> None:
        """Its own warm-up run (random labels) to compile the model, on a GPU only."""
        if cpu:
            return
        model = self._model(cpu)
        with in_folder(work), contextlib.redirect_stdout(sys.stderr):
            self.module.main("warmup", model)

    def run(self, work: Path, seed: int, cpu: bool, epochs: float | None) -> dict:
        if epochs:
            raise SystemExit(f"vs_airbench: --airbench-epochs applies to airbench94 only, not {self.name}")
        model = self._model(cpu)
        printed = io.StringIO()
        with in_folder(work), on_cpu() if cpu else contextlib.nullcontext(), contextlib.redirect_stdout(printed):
            torch.manual_seed(seed)
            start = time.perf_counter()
            returned = self.module.main(seed, model)
            wall = time.perf_counter() - start
        rows = read_table(printed.getvalue(), self.module.logging_columns_list)
        return self.result(returned, rows) | {"wall_s": wall}  # wall: with what its timer leaves out

    def result(self, returned, rows: list[dict[str, str]]) -> dict:
        raise NotImplementedError


class Airbench94Muon(ScriptPeer):
    """``airbench94_muon.py``: 8 epochs at batch 2000; its timer covers whitening, the epochs and
    the TTA evaluation (each epoch's evaluation without TTA is outside it); ``main`` returns the
    TTA accuracy and prints a row per epoch."""

    name, commit, sha256_expected = "airbench94_muon", MUON_COMMIT, MUON_SHA256
    fetch = MUON_FETCH

    def result(self, returned, rows: list[dict[str, str]]) -> dict:
        final = next(row for row in rows if row["epoch"] == "eval")
        epochs_seen = [row for row in rows if row["epoch"] not in ("eval", "")]
        trained = float(epochs_seen[-1]["time_seconds"])  # its timer: whitening + training epochs
        total = float(final["time_seconds"])  # + its TTA evaluation
        return {
            "accuracy": float(returned),
            "train_s": trained,
            "tta_eval_s": total - trained,
            "time_s": total,
            "epochs": [
                {"epoch": int(row["epoch"]), "val_acc": float(row["val_acc"]), "time_s": float(row["time_seconds"])}
                for row in epochs_seen
            ],
        }


class Hiverge(ScriptPeer):
    """hiverge/cifar10-speedrun's ``cifar10_speedrun.py`` (2.015 s on an A100): 7.63 epochs at
    batch 1536, batched Muon, colour jitter, TTA for the least confident fifth. Its timer covers
    whitening, training and the TTA evaluation in one (so ``train_s`` holds both); ``main``
    returns (accuracy without TTA, with TTA, seconds). Its fp16 Muon momentum stays fp16 on a CPU
    (a buffer, not the weights)."""

    name, commit, sha256_expected = "hiverge", HIVERGE_COMMIT, HIVERGE_SHA256
    fetch = HIVERGE_FETCH

    def result(self, returned, rows: list[dict[str, str]]) -> dict:
        plain, accuracy, seconds = returned
        return {"accuracy": float(accuracy), "accuracy_without_tta": float(plain), "time_s": float(seconds),
                "train_s": float(seconds), "tta_eval_s": 0.0}  # fmt: skip


PEERS = {"airbench94": Airbench94, "airbench94_muon": Airbench94Muon, "hiverge": Hiverge}


def make_peer(name: str, script: Path | None):
    return Airbench94() if name == "airbench94" else PEERS[name](script)
