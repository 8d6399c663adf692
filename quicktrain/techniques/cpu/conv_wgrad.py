"""Weight gradients of small 3x3 convolutions as matrix products (CPU).

oneDNN's backward-weights pass is slow for 3x3 convolutions on small feature maps. On a 2-core
Xeon (AMX; bf16, batch 512, 256 channels, two threads) it took 22 ms on 3x3 maps, 18 ms on 2x2
maps and 31 ms on 5x5 maps. Two matrix-product forms of the same gradient are faster there:

- on maps of at most :data:`MAX_PIXELS` pixels, one GEMM, output gradient (out, N*H*W) @ input
  patches (N*H*W, 9*in): 5-7 ms on 3x3 maps, 3 ms on 2x2 maps (gathering all nine taps of
  every pixel costs more than the product saves from 5x5 up);
- on maps of at most :data:`ROW_MAX_PIXELS` pixels, three GEMMs over the zero-padded input
  with only the three horizontal taps gathered (a 3x copy instead of 9x): each kernel row is
  the same product over rows shifted by one image row (16 ms on 5x5 maps); on 7x7 maps it was
  level with oneDNN (38.5 against 39.2 ms), which keeps them and everything larger.

``benchmarks/conv_wgrad.py`` measures them per shape on the machine at hand.

``use_gemm_weight_grad(model)`` turns every eligible ``nn.Conv2d`` (3x3, stride 1, padding 1,
no dilation or groups, zero padding) into :class:`GemmGradConv2d`: the same module, parameters
and state dict, whose forward is unchanged and whose backward computes the weight gradient by
GEMM on maps of at most :data:`ROW_MAX_PIXELS` pixels (larger maps take the usual path). The
input gradient always comes from oneDNN, which is fast for it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

MAX_PIXELS = 16  # 4x4: the one-GEMM form won at 3x3 and 2x2, was level at 5x5, lost from 7x7 up (two threads)
ROW_MAX_PIXELS = 36  # 6x6: the three-GEMM form won at 5x5 (16 ms against 30), was level at 7x7 (38.5 / 39.2)


def gemm_weight_grad(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """d(loss)/d(weight) of a 3x3, stride-1, padding-1 convolution from its input ``x``
    (N, C, H, W) and output gradient (N, O, H, W), any memory format: (O, C, 3, 3)."""
    n, c, h, w = x.shape
    padded = F.pad(x, (1, 1, 1, 1)).permute(0, 2, 3, 1)  # (N, H+2, W+2, C), a view
    sn, sh, sw, sc = padded.stride()
    # every 3x3 patch as a view (no copy yet): (N, H, W, ky, kx, C); reshape gathers it once
    patches = padded.as_strided((n, h, w, 3, 3, c), (sn, sh, sw, sh, sw, sc)).reshape(n * h * w, 9 * c)
    grad_rows = grad_out.permute(1, 0, 2, 3).reshape(grad_out.shape[1], n * h * w).contiguous()
    return (grad_rows @ patches).view(-1, 3, 3, c).permute(0, 3, 1, 2)  # (O, C, ky, kx)


def row_gemm_weight_grad(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """The same gradient as :func:`gemm_weight_grad` in three GEMMs: with the input padded and
    its three horizontal taps gathered per pixel of every padded row (N*(H+2)*W, 3*in), and the
    output gradient laid out on the same rows (its last two rows of every image zero), kernel
    row ky is output gradient rows @ input rows shifted down by ky image rows."""
    n, c, h, w = x.shape
    o = grad_out.shape[1]
    padded = F.pad(x, (1, 1, 1, 1)).permute(0, 2, 3, 1)  # (N, H+2, W+2, C), a view
    sn, sh, sw, sc = padded.stride()
    taps = padded.as_strided((n, h + 2, w, 3, c), (sn, sh, sw, sw, sc)).reshape(n * (h + 2) * w, 3 * c)
    grad_rows = grad_out.new_zeros(n, h + 2, w, o)
    grad_rows[:, :h] = grad_out.permute(0, 2, 3, 1)
    grad_rows = grad_rows.view(-1, o)
    rows = grad_rows.shape[0]
    out = grad_out.new_empty(3, o, 3 * c)
    for ky in range(3):  # rows past an image's end meet zero output gradient: no crosstalk
        torch.mm(grad_rows[: rows - ky * w].T, taps[ky * w :], out=out[ky])
    return out.view(3, o, 3, c).permute(1, 3, 0, 2)  # (O, C, ky, kx)


def weight_grad_form(pixels: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
    """The GEMM form that computes the weight gradient on a map of ``pixels`` pixels, or None
    where oneDNN's pass is kept."""
    if pixels <= MAX_PIXELS:
        return gemm_weight_grad
    if pixels <= ROW_MAX_PIXELS:
        return row_gemm_weight_grad
    return None


class _GemmGradConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return F.conv2d(x, weight, bias, padding=1)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.ops.aten.convolution_backward(
                grad_out, x, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, False, False]
            )[0]
        if ctx.needs_input_grad[1]:
            grad_w = weight_grad_form(x.shape[-1] * x.shape[-2])(x, grad_out).to(weight.dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_out.sum((0, 2, 3))
        return grad_x, grad_w, grad_b


class GemmGradConv2d(nn.Conv2d):
    """An ``nn.Conv2d`` (3x3, stride 1, padding 1) whose weight gradient on small maps is a GEMM."""

    def _conv_forward(self, input, weight, bias):
        small = weight_grad_form(input.shape[-1] * input.shape[-2]) is not None
        if not (small and input.device.type == "cpu" and torch.is_grad_enabled() and weight.requires_grad):
            return super()._conv_forward(input, weight, bias)
        if torch.is_autocast_enabled("cpu"):  # cast as autocast would, then run the function outside it
            dtype = torch.get_autocast_dtype("cpu")
            input, weight = input.to(dtype), weight.to(dtype)
            bias = bias.to(dtype) if bias is not None else None
            with torch.autocast("cpu", enabled=False):
                return _GemmGradConv.apply(input, weight, bias)
        return _GemmGradConv.apply(input, weight, bias)


def eligible(module: nn.Module) -> bool:
    return (
        type(module) is nn.Conv2d
        and module.kernel_size == (3, 3)
        and module.stride == (1, 1)
        and module.dilation == (1, 1)
        and module.groups == 1
        and module.padding in ((1, 1), "same")
        and module.padding_mode == "zeros"
    )


def use_gemm_weight_grad(model: nn.Module) -> int:
    """Turn every eligible convolution of ``model`` into a :class:`GemmGradConv2d` in place
    (same parameters, buffers and state dict); returns how many."""
    convs = [m for m in model.modules() if eligible(m)]
    for conv in convs:
        conv.__class__ = GemmGradConv2d
    return len(convs)
