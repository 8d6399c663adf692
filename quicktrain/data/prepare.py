"""The device side of the input pipeline: copy, convert, normalise, resize, lay out.

Resolved once from the techniques; the training step calls it without any ``if``.

The float batch is written into a buffer kept from the previous call of the same shape (in the
model's memory layout), not a fresh allocation: on a CPU a 224 px batch of 64 is 38 MB, which
glibc maps anew each time, and the page faults of that cost several times the arithmetic (the
photo benchmark's training process spent most of its time there). The uint8 batch is copied into
the float32 buffer and the multiply-add runs there in place: two vectorised passes, bit for bit
``addcmul`` on a fresh float copy. (One ``addcmul`` that reads the uint8 batch itself takes
TensorIterator's mixed-dtype path: 2.9x slower on a 224 px batch of 64 on one AVX-512 core, 5.6x
when it also writes bfloat16; ``benchmarks/input_normalise.py``.) The buffer is overwritten by the
next call: the step, evaluation and predict use each batch before asking for the next, and
autograd refuses (loudly) a buffer changed while a graph holds it.

``dtype`` bfloat16 writes the batch in the dtype a bf16-autocast first layer casts it to: the same
float32 arithmetic rounded once on the way out, so a convolution or linear layer under autocast
sees exactly the values it would have cast itself, and the first layer reads half the memory. On
a CPU it goes a few images at a time through a float32 scratch that stays in the cache.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from quicktrain.data.input_spec import IMAGENET_MEAN as IMAGENET_MEAN  # what pretrained weights expect
from quicktrain.data.input_spec import IMAGENET_STD as IMAGENET_STD
from quicktrain.data.input_spec import InputSpec

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
CHUNK_BYTES = 4 << 20  # the float32 scratch of a CPU bfloat16 batch: a few images, within the cache


class InputPipeline:
    """uint8 (B, 3, H, W) batches on the host -> normalised float batches on ``device``."""

    def __init__(
        self,
        device: torch.device,
        non_blocking: bool = False,
        image_size: int | None = None,
        memory_format: torch.memory_format = torch.contiguous_format,
        mean: tuple[float, ...] = CIFAR_MEAN,
        std: tuple[float, ...] = CIFAR_STD,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.device = device
        self.dtype = dtype
        self.non_blocking = non_blocking
        self.image_size = image_size
        self.memory_format = memory_format
        self.mean, self.std = tuple(mean), tuple(std)  # fractions of 255, per channel
        # folded so one fused multiply-add maps uint8 0..255 to (x / 255 - mean) / std
        std_t = torch.tensor(std, device=device).view(1, -1, 1, 1)
        self.scale = 1.0 / (255.0 * std_t)
        self.shift = -torch.tensor(mean, device=device).view(1, -1, 1, 1) / std_t
        self._buffers: dict[tuple, torch.Tensor] = {}  # (shape, inference mode) -> the last float batch

    @classmethod
    def from_spec(cls, spec: InputSpec, device: torch.device, non_blocking: bool = False) -> InputPipeline:
        """The pipeline a run's input record describes (resizing only when the model's size differs)."""
        layout = torch.channels_last if spec.layout == "NHWC" else torch.contiguous_format
        return cls(device, non_blocking, spec.model_resize, layout, spec.mean, spec.std)

    def to_device(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy a batch to the device; asynchronous only from pinned memory, else it would not be."""
        x, y = batch
        return (
            x.to(self.device, non_blocking=self.non_blocking),
            y.to(self.device, non_blocking=self.non_blocking),
        )

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 on the device -> (B, 3, S, S) ``dtype`` in ``memory_format``."""
        resize = self.image_size is not None and x.shape[-1] != self.image_size
        if not resize and self.dtype != torch.float32 and x.device.type == "cpu":
            return self._narrow_in_chunks(x)
        floats = self._buffer(x, torch.float32).copy_(x)  # uint8 -> float32, exact
        x = torch.addcmul(self.shift, floats, self.scale, out=floats)  # in place, float32 arithmetic
        if resize:
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False)
            x = x.to(self.dtype)
        elif self.dtype != torch.float32:
            x = self._buffer(x, self.dtype).copy_(x)  # rounded once, into its own kept buffer
        return x.contiguous(memory_format=self.memory_format)

    def _narrow_in_chunks(self, x: torch.Tensor) -> torch.Tensor:
        """The same arithmetic a few images at a time through a float32 scratch that stays in the
        CPU's cache, so the float32 batch never goes to memory (1.3x the whole-batch passes for a
        224 px batch of 64, one core)."""
        out = self._buffer(x, self.dtype)
        chunk = max(1, CHUNK_BYTES // (4 * x[0].numel()))
        scratch = self._buffer(x[:chunk], torch.float32)
        for start in range(0, len(x), chunk):
            part = x[start : start + chunk]
            floats = scratch[: len(part)].copy_(part)
            torch.addcmul(self.shift, floats, self.scale, out=floats)
            out[start : start + chunk].copy_(floats)
        return out.contiguous(memory_format=self.memory_format)

    def _buffer(self, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The kept buffer for batches of ``x``'s shape (made on first use)."""
        key = (tuple(x.shape), x.device, dtype, torch.is_inference_mode_enabled())
        buffer = self._buffers.get(key)
        if buffer is None:
            if len(self._buffers) >= 6:  # the full batch, the last short one, evaluation's; one or two dtypes
                self._buffers.clear()
            layout = self.memory_format if self.image_size is None else torch.contiguous_format
            buffer = torch.empty(x.shape, dtype=dtype, device=x.device, memory_format=layout)
            self._buffers[key] = buffer
        return buffer
