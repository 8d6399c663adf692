"""Muon: the Newton-Schulz orthogonalisation against known answers, the SGD half against
torch's SGD, and which weights each half takes."""

import copy

import pytest
import torch

from quicktrain.config import OptimConfig
from quicktrain.engine.muon import NS_COEFFICIENTS, MuonSGD, newton_schulz, ns_dtype
from quicktrain.engine.optim import build_optimizer, build_scheduler, muon_weights
from quicktrain.models import create_model


def _scalar_iteration(s: float, steps: int = 5) -> float:
    a, b, c = NS_COEFFICIENTS
    for _ in range(steps):
        s = a * s + b * s**3 + c * s**5
    return s


def test_newton_schulz_applies_the_quintic_to_each_singular_value():
    # diag(3, 1): Frobenius-normalised singular values 3/sqrt(10) and 1/sqrt(10), each mapped
    # by the scalar polynomial on its own; the singular vectors (the axes) are kept
    out = newton_schulz(torch.diag(torch.tensor([3.0, 1.0])))
    expected = torch.diag(torch.tensor([_scalar_iteration(3 / 10**0.5), _scalar_iteration(1 / 10**0.5)]))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", [(8, 8), (6, 20), (20, 6)])
def test_newton_schulz_is_close_to_the_orthogonal_factor_of_the_svd(shape):
    g = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    u, _, vh = torch.linalg.svd(g, full_matrices=False)
    out = newton_schulz(g)
    assert out.shape == g.shape
    singular = torch.linalg.svdvals(out)
    assert singular.min() > 0.5 and singular.max() < 1.3  # all pushed towards 1
    cosine = (out * (u @ vh)).sum() / (out.norm() * (u @ vh).norm())
    assert cosine > 0.95


def test_three_newton_schulz_steps_apply_the_quintic_three_times():
    # what airbench94_muon and hiverge/cifar10-speedrun run: fewer iterations, values further from 1
    g = torch.diag(torch.tensor([3.0, 1.0]))
    expected = torch.diag(torch.tensor([_scalar_iteration(3 / 10**0.5, 3), _scalar_iteration(1 / 10**0.5, 3)]))
    torch.testing.assert_close(newton_schulz(g, steps=3), expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(newton_schulz(g, steps=3), newton_schulz(g, steps=5), atol=1e-3)


def test_muon_ns_steps_from_config_reach_the_update():
    model = create_model("speedrun_net", num_classes=10)
    opt = build_optimizer(model, OptimConfig(optimizer="muon", muon_ns_steps=3))
    assert {g["ns_steps"] for g in opt.param_groups if g["muon"]} == {3}
    w = torch.nn.Parameter(torch.diag(torch.tensor([3.0, 1.0])))
    step = MuonSGD([{"params": [w], "muon": True, "ns_steps": 3}], lr=1.0, momentum=0.0, nesterov=False)
    w.grad = torch.diag(torch.tensor([3.0, 1.0]))
    before = w.detach().clone()
    step.step()
    torch.testing.assert_close(before - w.detach(), newton_schulz(before, steps=3))


def test_newton_schulz_in_bfloat16_stays_close_to_float32():
    g = torch.randn(64, 576, generator=torch.Generator().manual_seed(1))
    full, half = newton_schulz(g), newton_schulz(g, dtype=torch.bfloat16)
    assert half.dtype == torch.float32  # returned in the input's precision
    assert (half - full).norm() / full.norm() < 0.06
    assert not torch.equal(half, full)  # it did run in bf16


def test_newton_schulz_precision_follows_the_device():
    assert ns_dtype(torch.device("cuda")) == torch.bfloat16
    assert ns_dtype(torch.device("cpu")) == torch.float32
    model = create_model("speedrun_net", num_classes=10)
    assert build_optimizer(model, OptimConfig(optimizer="muon")).ns_dtype == torch.float32
    asked = OptimConfig(optimizer="muon", muon_precision="bfloat16")
    assert build_optimizer(model, asked).ns_dtype == torch.bfloat16


def test_sgd_groups_step_exactly_like_torch_sgd():
    torch.manual_seed(0)
    a = torch.randn(5, requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    ours = MuonSGD([{"params": [a], "weight_decay": 0.01}], lr=0.1, momentum=0.9, nesterov=True)
    ref = torch.optim.SGD([b], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
    for _ in range(3):
        grad = torch.randn(5)
        a.grad, b.grad = grad.clone(), grad.clone()
        ours.step()
        ref.step()
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_muon_step_by_hand(dtype):
    w = torch.nn.Parameter(torch.tensor([[2.0, 0.0], [0.0, 2.0]]))
    groups = [{"params": [w], "muon": True, "fixed_norm": True}]
    opt = MuonSGD(groups, lr=0.1, momentum=0.5, nesterov=True, dtype=dtype)
    w.grad = torch.diag(torch.tensor([3.0, 1.0]))
    opt.step()
    # fixed norm: ||W|| = sqrt(2) = sqrt(out), so W = I; the Nesterov update on a first step is
    # g + 0.5 g = 1.5 g, whose orthogonalisation is that of g (the scale normalises away)
    expected = torch.eye(2) - 0.1 * newton_schulz(1.5 * w.grad, dtype=dtype)
    torch.testing.assert_close(w.detach(), expected)


def test_muon_takes_conv_and_hidden_linear_weights_not_the_head_or_vectors():
    model = create_model("test_vit", num_classes=10)
    chosen = muon_weights(model)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert id(linears[-1].weight) not in chosen  # the classifier head
    assert all(id(m.weight) in chosen for m in linears[:-1])
    assert all(p.ndim >= 2 for p in model.parameters() if id(p) in chosen)


def test_muon_optimizer_from_config_covers_every_parameter_once_and_trains():
    torch.manual_seed(0)
    model = create_model("speedrun_net", num_classes=10)
    cfg = OptimConfig(optimizer="muon", lr=0.05, muon_lr=0.1, schedule="triangle", norm_bias_lr_scale=4)
    opt = build_optimizer(model, cfg)
    trainable = [p for p in model.parameters() if p.requires_grad]
    grouped = [p for g in opt.param_groups for p in g["params"]]
    assert len(grouped) == len(trainable) and {id(p) for p in grouped} == {id(p) for p in trainable}
    muon = [g for g in opt.param_groups if g["muon"]]
    assert muon and all(g["lr"] == 0.1 and g["momentum"] == 0.6 for g in muon)
    sched = build_scheduler(opt, cfg, total_updates=10, updates_per_epoch=5)
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
    losses = []
    for _ in range(8):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    assert losses[-1] < losses[0]
    assert muon[0]["lr"] < 0.1  # the schedule scales Muon's groups too


def _muon_pair(seed: int = 0):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Linear(8, 3))
    twin = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Linear(8, 3))
    twin.load_state_dict(net.state_dict())

    def opt(m):
        groups = [{"params": [m[0].weight], "muon": True, "fixed_norm": True}, {"params": [*m[0:1].parameters()][1:]}]
        groups.append({"params": list(m[1].parameters()), "weight_decay": 0.01})
        return MuonSGD(groups, lr=0.05, momentum=0.9)

    return net, opt(net), twin, opt(twin)


def test_grad_scaler_steps_muon_on_the_device_like_an_unscaled_step(monkeypatch):
    """Under fp16's GradScaler Muon takes the scale and the overflow flag as tensors: the same
    update as stepping the unscaled gradients, an overflowing update skipped (parameters and
    momentum untouched), and no host read of the flag (``Tensor.item`` is never called)."""
    net, opt, twin, ref = _muon_pair()
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    real_item = torch.Tensor.item
    for step in range(4):
        for m in (net, twin):
            m.zero_grad()
        torch.nn.functional.cross_entropy(twin(x), y).backward()
        ref.step()  # the reference: plain fp32 gradients
        loss = torch.nn.functional.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        if step == 2:  # an overflow: the scaler must skip this update for both optimizers alike
            net[0].weight.grad[0, 0] = float("inf")
            before = [p.detach().clone() for p in net.parameters()]
            momenta = [s["momentum_buffer"].clone() for s in opt.state.values()]
        monkeypatch.setattr(torch.Tensor, "item", lambda t: (_ for _ in ()).throw(AssertionError("host read")))
        scaler.step(opt)
        monkeypatch.setattr(torch.Tensor, "item", real_item)
        scaler.update()
        if step == 2:
            for p, b in zip(net.parameters(), before):
                torch.testing.assert_close(p.detach(), b, rtol=0, atol=0)
            for s, b in zip(opt.state.values(), momenta):
                torch.testing.assert_close(s["momentum_buffer"], b, rtol=0, atol=0)
            twin.load_state_dict(net.state_dict())  # the reference skips it too
            ref.load_state_dict(copy.deepcopy(opt.state_dict()))  # (loading shares the buffers)
        else:
            for p, q in zip(net.parameters(), twin.parameters()):
                torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert scaler.get_scale() < 1024.0 * 2**4  # the overflow halved the scale once


def test_a_skipped_first_muon_step_leaves_the_next_step_unchanged():
    net, opt, twin, ref = _muon_pair(1)
    for p in net.parameters():
        p.grad = torch.full_like(p, float("nan"))
    opt.found_inf = torch.ones(())
    opt.step()
    del opt.found_inf
    for p, q in zip(net.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    torch.manual_seed(2)
    for m in (net, twin):
        for p in m.parameters():
            p.grad = None
    grads = [torch.randn_like(p) for p in net.parameters()]
    for m, o in ((net, opt), (twin, ref)):
        for p, g in zip(m.parameters(), grads):
            p.grad = g.clone()
        o.step()
    for p, q in zip(net.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q)
