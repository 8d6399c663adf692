"""The Ignite loop end to end: complete records, exact resume, target time, overfitting."""

import json

import pytest
import torch
import yaml
from conftest import ctrl_c_at_evaluation, make_state, tiny_config

from quicktrain.config import Config
from quicktrain.cpuinfo import cpu_identity, first_processor
from quicktrain.data.synthetic import make_synthetic
from quicktrain.engine import oom as oom_module
from quicktrain.engine import train, train_step
from quicktrain.engine.setup import build_run
from quicktrain.errors import ConfigError
from quicktrain.models import create_model
from quicktrain.reporting import METRIC_FIELDS

SUMMARY_KEYS = {
    "model",
    "dataset",
    "batch_size",
    "micro_batch_size",
    "accum_steps",
    "amp",
    "pin_memory",
    "channels_last",
    "compile",
    "epochs",
    "optimizer_updates",
    "test_accuracy",
    "test_f1_macro",
    "test_loss",
    "train_time_s",
    "wall_time_s",
    "images_per_s",
    "target_accuracy",
    "time_to_target_s",
    "peak_memory_mb",
    "device",
    "seed",
}


def test_run_writes_a_complete_self_describing_record(tmp_path):
    cfg = tiny_config(
        tmp_path / "run",
        **{"run.epochs": 2, "run.tensorboard": True, "techniques.accum_steps": 2, "model.name": "test_resnet"},
    )
    result = train(cfg)
    folder = result.folder
    assert Config.from_dict(yaml.safe_load((folder / "config.yaml").read_text())) == cfg
    env = json.loads((folder / "env.json").read_text())
    assert {"torch", "timm", "pytorch_ignite", "device", "cpu"} <= set(env)
    assert set(cpu_identity(first_processor())) <= set(env)  # the generation too, where /proc/cpuinfo says it
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    assert all(set(METRIC_FIELDS) <= set(r) for r in rows)
    summary = json.loads((folder / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert summary["status"] == "completed"
    assert summary["optimizer_updates"] == 2 * 3  # 96 samples / 32 per update, 2 epochs
    assert summary["micro_batch_size"] == 16 and summary["accum_steps"] == 2
    assert summary["train_time_s"] <= summary["wall_time_s"]
    assert list(folder.glob("events.out.tfevents.*")), "TensorBoard events written"
    weights = torch.load(folder / "model.pt", weights_only=True)
    create_model("test_resnet", num_classes=10).load_state_dict(weights)
    assert len(list((folder / "checkpoints").glob("*.pt"))) == 2


ZEN5_VM = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni

processor\t: 1
cpu family\t: 25
"""
XEON = "cpu family\t: 6\nmodel\t\t: 143\nstepping\t: 8\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"


def test_env_tells_cpu_generations_apart_where_the_name_does_not():
    # a VM that names only "AMD EPYC": Zen 4 and Zen 5 differ ~1.8x in speed, the family tells them apart
    assert cpu_identity(first_processor(ZEN5_VM)) == {
        "cpu_model": "x86 family 26 model 2 stepping 1",  # the first processor's, not the second's
        "cpu_features": "avx2 avx512f avx512_bf16 avx512_vnni",
    }
    assert cpu_identity(first_processor(XEON))["cpu_features"] == "avx2 avx512f avx512_bf16 amx_bf16 amx_tile"
    assert cpu_identity(first_processor("processor\t: 0\nBogoMIPS\t: 50.00\n")) == {}  # an ARM cpuinfo: nothing to say


def test_time_to_target_is_recorded_or_null(tmp_path):
    reached = train(tiny_config(tmp_path / "a", **{"run.target_accuracy": 0.01, "run.epochs": 2}))
    first_epoch_time = reached.history[0]["train_time_s"]
    assert reached.summary["time_to_target_s"] == pytest.approx(first_epoch_time)
    missed = train(tiny_config(tmp_path / "b", **{"run.target_accuracy": 1.0}))
    assert missed.summary["time_to_target_s"] is None


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"optim.lookahead": 0.8, "optim.lookahead_every": 2, "optim.norm_bias_lr_scale": 8.0},
        {"optim.optimizer": "muon", "optim.muon_lr": 0.05, "data.low_res": 24, "data.low_res_epochs": 1},
        {"optim.model_ema": 0.9, "data.mixup": 0.8, "data.cutmix": 1.0},  # model.pt: the EMA
    ],
    ids=["plain", "lookahead", "muon_low_res", "ema_mixup"],
)
def test_resume_continues_exactly(tmp_path, monkeypatch, extra):
    """2 epochs straight == 1 epoch, killed, then resumed for the second (BatchNorm,
    augmentation, momentum and a one-cycle schedule included; lookahead's slow weights too)."""
    overrides = {"run.epochs": 2, "model.name": "test_resnet", "optim.schedule": "onecycle", **extra}
    straight = train(tiny_config(tmp_path / "straight", **overrides))

    ctrl_c_at_evaluation(monkeypatch, 3 if "optim.model_ema" in extra else 2)  # in the second epoch (EMA: 2 a time)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_config(tmp_path / "resumed", **overrides, **{"run.progress": True, "run.tensorboard": True}))
    interrupted = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert interrupted["status"] == "interrupted" and interrupted["epochs_completed"] == 1
    # work and time of the same, completed epoch: never an unfinished epoch's updates
    first = straight.history[0]
    assert interrupted["optimizer_updates"] == first["optimizer_updates"] == 3
    assert interrupted["train_time_s"] == pytest.approx(interrupted["train_samples"] / interrupted["images_per_s"])
    assert not (tmp_path / "resumed" / "model.pt").exists()

    monkeypatch.undo()
    resumed = train(tiny_config(tmp_path / "resumed", **overrides, **{"run.resume": "auto"}))
    assert resumed.summary["status"] == "completed"
    assert resumed.summary["optimizer_updates"] == straight.summary["optimizer_updates"]
    assert [r["epoch"] for r in resumed.history] == [1, 2]
    a = torch.load(straight.folder / "model.pt", weights_only=True)
    b = torch.load(resumed.folder / "model.pt", weights_only=True)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)


def test_a_failing_run_is_recorded_as_failed(tmp_path, monkeypatch):
    def explode(state, batch):
        raise RuntimeError("boom")

    monkeypatch.setattr(oom_module, "train_step", explode)
    # with progress bars and TensorBoard on: their handlers must not swallow the error
    with pytest.raises(RuntimeError, match="boom"):
        train(tiny_config(tmp_path / "run", **{"run.progress": True, "run.tensorboard": True}))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"] == "RuntimeError: boom"
    assert summary["test_accuracy"] is None
    assert not (tmp_path / "run" / "model.pt").exists()


def test_resume_refuses_a_changed_model(tmp_path):
    train(tiny_config(tmp_path / "run"))
    with pytest.raises(ConfigError, match="model.name was 'test_vit' there, now 'test_resnet'"):
        train(tiny_config(tmp_path / "run", **{"run.resume": "auto", "model.name": "test_resnet"}))


def test_resume_auto_needs_the_run_folder():
    with pytest.raises(ConfigError, match="pass --out"):
        train(tiny_config(None, **{"run.resume": "auto"}))


def test_existing_record_is_never_overwritten(tmp_path):
    train(tiny_config(tmp_path / "run"))
    with pytest.raises(ConfigError, match="already holds a run record"):
        train(tiny_config(tmp_path / "run"))


def test_tiny_model_overfits_one_batch():
    torch.manual_seed(0)
    data = make_synthetic(num_train=32, num_test=1).train
    batch = (torch.from_numpy(data.images).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(data.labels))
    state = make_state(create_model("test_resnet", num_classes=10), micro_batch_size=8, lr=0.1, momentum=0.9)
    for _ in range(40):
        metrics = train_step(state, batch)
    assert float(metrics.loss) < 0.05
    state.model.eval()
    with torch.no_grad():
        preds = state.model(state.inputs(batch[0])).argmax(1)
    assert (preds == batch[1]).float().mean() == 1.0


def test_training_learns_synthetic_data(tmp_path):
    result = train(
        tiny_config(
            tmp_path / "run",
            **{"run.epochs": 4, "data.max_train_samples": 256, "model.name": "test_resnet", "optim.lr": 0.2},
        )
    )
    assert result.summary["test_accuracy"] > 0.5  # chance is 0.1
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]


def test_channels_last_puts_weights_and_inputs_in_nhwc_and_trains_like_nchw(tmp_path):
    overrides = {"model.name": "test_resnet", "run.epochs": 1}
    run = build_run(tiny_config(tmp_path / "probe", **overrides, **{"techniques.channels_last": True}))
    convs = [m.weight for m in run.state.model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs and all(w.is_contiguous(memory_format=torch.channels_last) for w in convs)
    x, _ = next(iter(run.train_loader))
    assert run.state.inputs(x).is_contiguous(memory_format=torch.channels_last)
    nchw = build_run(tiny_config(tmp_path / "nchw", **overrides))
    batch = next(iter(nchw.train_loader))
    # one update of the same computation in the other layout: the same weights, to float rounding
    train_step(run.state, batch)
    train_step(nchw.state, batch)
    a, b = run.state.model.state_dict(), nchw.state.model.state_dict()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_compiled_run_saves_plain_weights(tmp_path):
    """torch.compile (about 20 s on 2 CPU cores): the record and model.pt are the uncompiled module's."""
    result = train(tiny_config(tmp_path / "run", **{"techniques.compile": True, "data.max_train_samples": 64}))
    assert result.summary["compile"] is True and result.summary["status"] == "completed"
    weights = torch.load(result.folder / "model.pt", weights_only=True)
    assert not any(k.startswith("_orig_mod") for k in weights)
    create_model("test_vit", num_classes=10).load_state_dict(weights)


def test_eval_every_skips_evaluations_but_always_evaluates_the_last_epoch(tmp_path):
    result = train(tiny_config(tmp_path, **{"run.epochs": 3, "run.eval_every": 2}))
    assert ["test_accuracy" in row for row in result.history] == [False, True, True]
    assert result.summary["test_accuracy"] == result.history[-1]["test_accuracy"]


def test_importing_quicktrain_leaves_the_process_warning_filters_alone():
    """The scheduler-order warning is silenced around quicktrain's own scheduler step only."""
    import subprocess
    import sys

    code = (
        "import warnings, quicktrain.engine, quicktrain.engine.step, quicktrain.cli; "
        "print(any(f[1] is not None and 'lr_scheduler' in f[1].pattern for f in warnings.filters))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
