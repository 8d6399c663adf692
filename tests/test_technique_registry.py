"""The technique protocol: a technique registered from outside quicktrain (here, this test module)
reaches the banner, the record, the ablation grid, --techniques and --switch with nothing else
changed; every built-in technique resolves to an object that may do nothing."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch import nn

from quicktrain.config import Config
from quicktrain.engine import train
from quicktrain.errors import ConfigError
from quicktrain.experiments.grid import arm_name, parse_switch, parse_techniques, plan
from quicktrain.records import technique_arm
from quicktrain.techniques.base import Technique
from quicktrain.techniques.registry import Spec, arm_names, register, specs, unregister
from quicktrain.techniques.resolve import resolve_techniques
from tests.conftest import tiny_config

CALLS: list[str] = []


@dataclass
class Smoothing(Technique):
    """A dummy technique: switched by optim.label_smoothing, it only watches its hooks being called."""

    value: float
    name = "smooth"

    @property
    def active(self) -> bool:
        return self.value > 0

    def apply_process(self) -> None:
        CALLS.append("apply_process")

    def restore_process(self) -> None:
        CALLS.append("restore_process")

    def prepare_model(self, model: nn.Module) -> nn.Module:
        CALLS.append(f"prepare_model:{type(model).__name__}")
        return model

    def banner(self) -> str:
        return f"label smoothing {self.value:g} (a test's technique)"

    def record(self) -> dict[str, object]:
        return {"smooth": self.active}


def resolve_smoothing(cfg: Config, device: torch.device, distributed: object = None) -> Smoothing:
    return Smoothing(cfg.optim.label_smoothing)


@pytest.fixture
def smooth():
    CALLS.clear()
    spec = register(
        Spec("smooth", "label smoothing", "optim.label_smoothing", on=0.1, off=0.0, resolve=resolve_smoothing)
    )
    try:
        yield spec
    finally:
        unregister("smooth")


def test_a_registered_technique_is_in_the_banner_the_record_and_its_hooks_run(smooth, tmp_path, quicktrain_log):
    result = train(tiny_config(tmp_path / "run", **{"optim.label_smoothing": 0.1}))
    assert "label smoothing 0.1 (a test's technique)" in quicktrain_log.text
    assert result.summary["smooth"] is True
    assert technique_arm(result.summary) == "smooth"  # a plain run's arm, read from its record
    assert CALLS[0] == "apply_process" and CALLS[-1] == "restore_process"
    assert any(c.startswith("prepare_model:") for c in CALLS)


def test_a_registered_technique_is_an_ablation_arm_and_a_reserved_switch_name(smooth):
    assert "smooth" in arm_names()
    techniques = parse_techniques("amp,smooth")
    jobs = plan(techniques, ["test_vit"], ["synthetic"], repeats=1, base_seed=0, accum_steps=2)
    arms = {arm_name(j.arm): j.overrides for j in jobs}
    assert set(arms) == {"baseline", "amp", "smooth", "amp+smooth"}
    assert arms["smooth"]["optim.label_smoothing"] == 0.1 and arms["baseline"]["optim.label_smoothing"] == 0.0
    with pytest.raises(ConfigError, match="taken by a built-in technique"):
        parse_switch("smooth=optim.lr=0.1")


def test_unregistered_it_is_gone_again(smooth):
    unregister("smooth")
    with pytest.raises(ConfigError, match="unknown technique 'smooth'"):
        parse_techniques("smooth")
    register(smooth)  # for the fixture's own clean-up


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        register(Spec("amp", "again", "techniques.amp", resolve=resolve_smoothing))


@pytest.mark.parametrize("name", [s.name for s in specs()])
def test_every_builtin_technique_resolves_on_a_cpu_and_says_what_it_did(name):
    cfg = Config.from_overrides({"techniques.tf32": True, "techniques.gemm_wgrad": True, "techniques.pin_memory": True})
    techniques = resolve_techniques(cfg, torch.device("cpu"))
    item = techniques.get(name)
    assert item.name == name
    assert isinstance(item.record(), dict)
    if name in ("tf32", "pin"):  # asked for, but they need CUDA: inactive, with the reason
        assert not item.active and item.note
    if name == "cuda_kernels":
        assert not item.active and item.banner() is None and item.optimizer_options() == {}


def test_cuda_flags_are_set_explicitly_and_restored(monkeypatch):
    """On CUDA an arm without tf32 sets both flags False (cuDNN's default is True), and the run's
    end puts back what the caller had: checked on the flags themselves, which a CPU can set."""
    from quicktrain.techniques.cuda import TF32, CudaKernels

    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    torch.backends.cudnn.allow_tf32 = True
    try:
        off, kernels = TF32(requested=False, cuda=True), CudaKernels(active=True)
        off.apply_process()
        kernels.apply_process()
        assert torch.backends.cudnn.allow_tf32 is False and torch.backends.cuda.matmul.allow_tf32 is False
        assert torch.backends.cudnn.benchmark is True
        kernels.restore_process()
        off.restore_process()
        assert torch.backends.cudnn.allow_tf32 is True and torch.backends.cudnn.benchmark is before[2]
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = before


def test_the_registry_and_the_record_format_import_no_torch():
    """--help, the record format and reports list the techniques without loading torch."""
    import subprocess
    import sys

    code = "import sys, quicktrain.techniques.registry, quicktrain.records; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@dataclass
class EpochNoise(Technique):
    """A technique that needs the newer hooks: the run's length (attach), each epoch's start, each
    micro-batch's input and every update; registered from outside with key None (always resolved)."""

    name = "epoch_noise"
    seen: list = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.seen = []

    @property
    def active(self) -> bool:
        return True

    def attach(self, built) -> None:
        self.seen.append(("attach", built.total_updates, isinstance(built.optimizer, torch.optim.Optimizer)))

    def start_epoch(self, epoch: int) -> None:
        self.seen.append(("epoch", epoch))

    def micro_input(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(("micro", tuple(x.shape)))
        return x

    def after_update(self, model: nn.Module, update: int) -> None:
        self.seen.append(("update", update))


def test_a_technique_with_epoch_micro_batch_and_attach_hooks_is_called_by_the_engine(tmp_path):
    made: list[EpochNoise] = []
    register(
        Spec(
            "epoch_noise",
            "sees its hooks",
            None,
            resolve=lambda cfg, device, dist: made.append(EpochNoise()) or made[-1],
        )
    )
    try:
        overrides = {"run.epochs": 2, "run.batch_size": 32, "techniques.micro_batch_size": 16}
        train(tiny_config(tmp_path / "run", **overrides))  # 96 samples: 3 updates of 2 micro-batches an epoch
    finally:
        unregister("epoch_noise")
    seen = made[-1].seen
    assert seen[0] == ("attach", 6, True)
    assert [s for s in seen if s[0] == "epoch"] == [("epoch", 0), ("epoch", 1)]
    assert sum(s[0] == "micro" for s in seen) == 12 and seen[2] == ("micro", (16, 3, 32, 32))
    assert [s[1] for s in seen if s[0] == "update"] == [1, 2, 3, 4, 5, 6]


def test_the_engine_imports_only_the_technique_protocol():
    """engine/ names no technique: it imports base, registry and resolve, and its state has no technique field."""
    import ast
    import dataclasses
    from pathlib import Path

    from quicktrain.engine.state import TrainState

    engine = Path(__file__).resolve().parents[1] / "quicktrain" / "engine"
    imported = set()
    for path in engine.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("quicktrain.techniques"):
                imported.add(node.module)
    assert imported <= {"quicktrain.techniques.base", "quicktrain.techniques.registry", "quicktrain.techniques.resolve"}
    fields = {f.name for f in dataclasses.fields(TrainState)}
    assert fields == {
        "model",
        "optimizer",
        "scheduler",
        "criterion",
        "inputs",
        "techniques",
        "grad_clip",
        "counters",
        "guard",
    }
