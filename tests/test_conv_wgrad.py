"""GEMM weight gradients for small 3x3 convolutions (``techniques.gemm_wgrad``): the same
gradients as PyTorch's convolution, taken only where asked, and the same training."""

import copy

import pytest
import torch
from conftest import tiny_config
from torch import nn

import quicktrain.techniques.cpu.conv_wgrad as conv_wgrad
from quicktrain.engine import train
from quicktrain.models.speedrun import SpeedrunNet
from quicktrain.techniques.cpu.conv_wgrad import GemmGradConv2d, use_gemm_weight_grad


def _pair(bias: bool) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    native = nn.Sequential(
        nn.Conv2d(5, 6, 3, padding=1, bias=bias), nn.GELU(), nn.Conv2d(6, 4, 3, padding="same", bias=bias)
    ).double()
    gemm = copy.deepcopy(native)
    assert use_gemm_weight_grad(gemm) == 2
    return native, gemm


def _spy(monkeypatch, name: str) -> list:
    calls = []
    real = getattr(conv_wgrad, name)

    def spy(x, grad):
        calls.append(tuple(x.shape))
        return real(x, grad)

    monkeypatch.setattr(conv_wgrad, name, spy)
    return calls


@pytest.fixture
def gemm_calls(monkeypatch):
    """Shapes the one-GEMM form ran on."""
    return _spy(monkeypatch, "gemm_weight_grad")


@pytest.fixture
def row_calls(monkeypatch):
    """Shapes the three-GEMM (row) form ran on."""
    return _spy(monkeypatch, "row_gemm_weight_grad")


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
# (H, W): up to MAX_PIXELS (16) one GEMM, up to ROW_MAX_PIXELS (36) three, above that oneDNN
@pytest.mark.parametrize("hw", [(1, 1), (3, 4), (4, 4), (5, 5), (5, 6), (6, 6), (6, 7), (7, 7)])
def test_same_gradients_as_pytorch(bias, channels_last, hw, gemm_calls, row_calls):
    native, gemm = _pair(bias)
    x = torch.randn(3, 5, *hw, dtype=torch.double)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.testing.assert_close(gemm(x2), native(x1))
    (native(x1) ** 2).sum().backward()
    (gemm(x2) ** 2).sum().backward()
    for (name, p), q in zip(native.named_parameters(), gemm.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=name)
    torch.testing.assert_close(x2.grad, x1.grad)
    pixels = hw[0] * hw[1]
    one, rows = pixels <= conv_wgrad.MAX_PIXELS, conv_wgrad.MAX_PIXELS < pixels <= conv_wgrad.ROW_MAX_PIXELS
    assert (len(gemm_calls), len(row_calls)) == (2 if one else 0, 2 if rows else 0)


@pytest.mark.parametrize("hw", [(2, 2), (3, 3), (5, 5), (4, 7)])
def test_both_gemm_forms_give_the_convolutions_weight_gradient(hw):
    """Each form on its own, on any map size, against aten's convolution backward."""
    torch.manual_seed(0)
    x, grad, weight = torch.randn(4, 6, *hw).double(), torch.randn(4, 7, *hw).double(), torch.randn(7, 6, 3, 3).double()
    args = (None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False])
    expected = torch.ops.aten.convolution_backward(grad, x, weight, *args)[1]
    torch.testing.assert_close(conv_wgrad.gemm_weight_grad(x, grad), expected)
    torch.testing.assert_close(conv_wgrad.row_gemm_weight_grad(x, grad), expected)


def test_under_bf16_autocast_as_pytorch_within_rounding(gemm_calls):
    torch.manual_seed(0)
    native = nn.Conv2d(32, 16, 3, padding=1, bias=False)
    gemm = copy.deepcopy(native)
    use_gemm_weight_grad(gemm)
    x = torch.randn(8, 32, 3, 3)
    for model in (native, gemm):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = model(x)
        assert y.dtype == torch.bfloat16
        y.float().square().sum().backward()
    assert gemm_calls == [(8, 32, 3, 3)]  # it ran on bf16 inputs
    assert gemm.weight.grad.dtype == torch.float32  # back to the master weight's dtype
    scale = native.weight.grad.abs().max().item()
    torch.testing.assert_close(gemm.weight.grad, native.weight.grad, rtol=2e-2, atol=2e-2 * scale)


def test_no_gradient_needed_no_gemm(gemm_calls):
    _, gemm = _pair(bias=False)
    with torch.no_grad():
        gemm(torch.randn(2, 5, 4, 4, dtype=torch.double))
    gemm.requires_grad_(False)
    gemm(torch.randn(2, 5, 4, 4, dtype=torch.double, requires_grad=True)).sum().backward()
    assert gemm_calls == []


def test_only_plain_3x3_stride_1_padding_1_convolutions_are_taken():
    class MyConv(nn.Conv2d):
        pass

    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),  # taken
        nn.Conv2d(4, 4, 3, padding="same", bias=False),  # taken
        nn.Conv2d(4, 4, 3, stride=2, padding=1),
        nn.Conv2d(4, 4, 1),
        nn.Conv2d(4, 4, 3, padding=1, groups=2),
        nn.Conv2d(4, 4, 3, padding=2, dilation=2),
        nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"),
        nn.Conv2d(4, 4, 3, padding=0),
        MyConv(4, 4, 3, padding=1),  # a user's subclass may have its own forward
    )
    keys = list(model.state_dict())
    assert use_gemm_weight_grad(model) == 2
    assert [type(m) is GemmGradConv2d for m in model] == [True, True] + [False] * 7
    assert list(model.state_dict()) == keys


@pytest.mark.parametrize("low_res", [None, 24])
def test_training_speedrun_net_matches_the_native_gradients(tmp_path, gemm_calls, row_calls, low_res):
    """The same run with and without the switch (float32, SGD): the same weights afterwards,
    and the GEMM forms ran where the maps are small (at 32 px the last convolution's 3x3 maps;
    at 24 px two convolutions on 5x5 maps and the last on 2x2)."""
    torch.manual_seed(0)
    native = SpeedrunNet(10)
    gemm = copy.deepcopy(native)
    start = copy.deepcopy(native.state_dict())
    resize = {"data.low_res": low_res, "data.low_res_epochs": 1} if low_res else {}
    for model, on, out in ((native, False, "native"), (gemm, True, "gemm")):
        cfg = tiny_config(tmp_path / out, **{"techniques.gemm_wgrad": on, "optim.optimizer": "sgd", **resize})
        result = train(cfg, model=model)
        assert result.summary["status"] == "completed" and result.summary["gemm_wgrad"] is on
    assert type(gemm.body[3][4]) is GemmGradConv2d and type(native.body[3][4]) is nn.Conv2d
    if low_res:  # 3 updates
        assert gemm_calls == [(32, 256, 2, 2)] * 3
        assert row_calls == [(32, 256, 5, 5)] * 6
    else:
        assert gemm_calls == [(32, 256, 3, 3)] * 3 and row_calls == []
    moved = [k for k, v in native.state_dict().items() if v.is_floating_point() and not torch.equal(v, start[k])]
    assert "body.3.4.weight" in moved and "body.2.4.weight" in moved
    for key, value in native.state_dict().items():
        torch.testing.assert_close(gemm.state_dict()[key], value, rtol=1e-4, atol=1e-5, msg=key)
