"""AMP: the scaler acts once per update, skips non-finite updates, and is a no-op when off."""

import copy

import pytest
import torch
from conftest import make_state, uint8_batch

from quicktrain.data.synthetic import make_synthetic
from quicktrain.engine import train_step
from quicktrain.errors import ConfigError
from quicktrain.models import create_model
from quicktrain.techniques.precision import Precision, cpu_supports_bf16, resolve_precision

CPU = torch.device("cpu")


def test_fp16_on_cpu_is_a_clear_error():
    with pytest.raises(ConfigError, match="fp16 needs a CUDA device"):
        resolve_precision("fp16", CPU)


def test_auto_on_cpu_picks_bf16_when_the_cpu_has_it():
    p = resolve_precision("auto", CPU)
    assert p.mode == ("bf16" if cpu_supports_bf16() else "off")
    assert not p.needs_scaler and not p.make_scaler().is_enabled()


def test_off_is_a_null_context_and_disabled_scaler():
    p = resolve_precision("off", CPU)
    assert p.dtype is None and not p.make_scaler().is_enabled()
    with p.autocast():
        assert not torch.is_autocast_enabled("cpu")


def _scaled_state(model, micro, **kw):
    return make_state(model, micro_batch_size=micro, scaler=torch.amp.GradScaler("cpu", init_scale=2.0**16), **kw)


def test_scaler_unscales_and_steps_once_per_update():
    state = _scaled_state(create_model("test_vit", num_classes=10), micro=4)
    counts = {"unscale": 0, "step": 0, "update": 0}
    for name in counts:
        original = getattr(state.techniques.precision.scaler, name if name != "unscale" else "unscale_")

        def counted(*a, _name=name, _original=original, **k):
            counts[_name] += 1
            return _original(*a, **k)

        setattr(state.techniques.precision.scaler, name if name != "unscale" else "unscale_", counted)
    train_step(state, uint8_batch(16))  # 4 micro-batches, one update
    assert counts == {"unscale": 1, "step": 1, "update": 1}


def test_enabled_scaler_gives_the_fp32_update_and_clips_after_unscaling():
    """Loss scaling by 2^16 is exact in fp32; if clipping ran before unscaling, the norms
    would be 65536 times too large and the clipped update would differ."""
    torch.manual_seed(0)
    model = create_model("test_vit", num_classes=10)
    batch = uint8_batch(16)
    plain = make_state(copy.deepcopy(model), micro_batch_size=4, grad_clip=0.05)
    scaled = _scaled_state(copy.deepcopy(model), micro=4, grad_clip=0.05)
    m_plain, m_scaled = train_step(plain, batch), train_step(scaled, batch)
    assert float(m_plain.grad_norm) > 0.05  # clipping really happened
    torch.testing.assert_close(m_plain.grad_norm, m_scaled.grad_norm, rtol=1e-5, atol=1e-6)
    for a, b in zip(plain.model.parameters(), scaled.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_disabled_scaler_equals_a_hand_written_fp32_step():
    torch.manual_seed(0)
    model = create_model("test_resnet", num_classes=10)
    batch = uint8_batch(8)
    state = make_state(copy.deepcopy(model), micro_batch_size=8)
    train_step(state, batch)
    ref = copy.deepcopy(model).train()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    torch.nn.functional.cross_entropy(ref(state.inputs(batch[0])), batch[1]).backward()
    opt.step()
    for a, b in zip(state.model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step")  # the skipped update steps the schedule
def test_injected_inf_gradient_skips_the_update_and_halves_the_scale():
    torch.manual_seed(0)
    state = _scaled_state(create_model("test_vit", num_classes=10), micro=4)
    before = [p.detach().clone() for p in state.model.parameters()]
    poisoned = next(state.model.parameters())
    calls = {"n": 0}

    def poison(grad):
        calls["n"] += 1
        return torch.full_like(grad, float("inf")) if calls["n"] == 2 else grad  # 2nd micro-batch

    handle = poisoned.register_hook(poison)
    train_step(state, uint8_batch(16))
    handle.remove()
    assert state.techniques.precision.scaler.get_scale() == 2.0**15
    assert state.counters.skipped_updates == 0  # counted on the device, not yet read ...
    state.settle()  # ... until a check point reads it
    assert state.counters.skipped_updates == 1 and state.counters.num_updates == 1
    for a, b in zip(before, state.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert all(p.grad is None for p in state.model.parameters())  # zeroed for the next window
    # the next, finite update goes through
    train_step(state, uint8_batch(16, seed=1))
    state.settle()
    assert state.counters.skipped_updates == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, state.model.parameters()))


@pytest.mark.skipif(not cpu_supports_bf16(), reason="this CPU has no native bf16")
def test_bf16_autocast_on_cpu_trains():
    torch.manual_seed(0)
    precision = Precision("bf16", torch.bfloat16, "cpu")
    state = make_state(
        create_model("test_resnet", num_classes=10), micro_batch_size=16, lr=0.2, precision=precision, momentum=0.9
    )
    data = make_synthetic(num_train=32, num_test=1).train
    batch = (torch.from_numpy(data.images).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(data.labels))
    losses = [float(train_step(state, batch).loss) for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0]
    with precision.autocast():
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16


@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 autocast needs CUDA")
def test_fp16_on_cuda_uses_a_scaler():
    p = resolve_precision("fp16", torch.device("cuda"))
    assert p.needs_scaler and p.make_scaler().is_enabled()


def test_auto_on_cuda_counts_only_native_bf16(monkeypatch):
    """torch.cuda.is_bf16_supported() counts emulation (T4, V100): auto must pick fp16 there."""
    from quicktrain.techniques import precision

    asked = {}

    def supported(including_emulation=True):
        asked["including_emulation"] = including_emulation
        return including_emulation  # a T4: bf16 only emulated

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    assert precision.resolve_precision("auto", torch.device("cuda")).mode == "fp16"
    assert asked == {"including_emulation": False}
    assert precision.tune_values("cuda", False) == ["off", "fp16"]
