"""Do GEMM weight gradients (``--gemm-wgrad``) pay on this machine?

1. Per convolution shape of speedrun_net (batch 512, bf16, channels-last): oneDNN's
   backward-weights pass against :func:`quicktrain.techniques.cpu.conv_wgrad.gemm_weight_grad`
   (one GEMM) and ``row_gemm_weight_grad`` (three GEMMs over shifted rows), interleaved, with
   each gradient's relative difference from a float32 reference.
2. quicktrain's whole training step (the Ignite Engine running ``train_step``, the Muon recipe's
   settings read from its config file) without and with ``techniques.gemm_wgrad``, at full size and at the
   recipe's 24 px low-resolution epochs; ratios trial by trial.

    python benchmarks/conv_wgrad.py
    OMP_NUM_THREADS=1 taskset -c 0 python benchmarks/conv_wgrad.py --repeats 7
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import spread, step_parser
from recipe_step import switch_ab

from quicktrain.techniques.cpu.conv_wgrad import gemm_weight_grad, row_gemm_weight_grad, weight_grad_form

# (map, in, out) at 32 px, then the maps of the 24 px epochs that differ
SHAPES = [
    (31, 24, 64),
    (15, 64, 64),
    (15, 64, 256),
    (7, 256, 256),
    (3, 256, 256),
    (11, 64, 256),
    (5, 256, 256),
    (2, 256, 256),
]


def onednn_weight_grad(x: torch.Tensor, grad: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    args = (None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False])
    return torch.ops.aten.convolution_backward(grad, x, weight, *args)[1]


def per_shape(batch: int, repeats: int) -> None:
    print(f"weight gradient per shape, batch {batch}, bf16, channels-last (ms, median [min-max] of {repeats}):")
    for size, cin, cout in SHAPES:

        def make(*shape):
            return torch.randn(*shape, dtype=torch.bfloat16).to(memory_format=torch.channels_last)

        x, grad, w = make(batch, cin, size, size), make(batch, cout, size, size), make(cout, cin, 3, 3)
        exact = onednn_weight_grad(x.float(), grad.float(), w.float())
        sides = {
            "oneDNN": lambda x=x, grad=grad, w=w: onednn_weight_grad(x, grad, w),
            "GEMM": lambda x=x, grad=grad: gemm_weight_grad(x, grad),
            "row GEMMs": lambda x=x, grad=grad: row_gemm_weight_grad(x, grad),
        }
        times: dict[str, list[float]] = {name: [] for name in sides}
        errors = {n: float((f().float() - exact).norm() / exact.norm()) for n, f in sides.items()}  # also warm-up
        for trial in range(repeats):
            for name in sides if trial % 2 == 0 else reversed(sides):
                start = time.perf_counter()
                sides[name]()
                times[name].append((time.perf_counter() - start) * 1e3)
        form = weight_grad_form(size * size)
        used = {gemm_weight_grad: "GEMM", row_gemm_weight_grad: "row GEMMs", None: "oneDNN"}[form]
        measured = ", ".join(f"{n} {spread(t)} (rel. error {errors[n]:.1e})" for n, t in times.items())
        print(f"  {size:2d}x{size:<2d} {cin:3d}->{cout:3d}: {measured}; --gemm-wgrad uses {used}")


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--skip-shapes", action="store_true", help="only the whole-step comparison")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if not args.skip_shapes:
        per_shape(args.batch, args.repeats)
    switch_ab(args, "techniques.gemm_wgrad")


if __name__ == "__main__":
    main()
