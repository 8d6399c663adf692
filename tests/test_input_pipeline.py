"""The device side of the input pipeline: uint8 batches normalised into a kept buffer, bit for bit
what a fresh float batch gives, in the model's layout."""

from __future__ import annotations

import pytest
import torch

from quicktrain.data import prepare
from quicktrain.data.prepare import InputPipeline


def _fresh(pipe: InputPipeline, x: torch.Tensor) -> torch.Tensor:
    """The arithmetic on a newly allocated float batch (the pipeline before it kept a buffer)."""
    y = x.float()
    return torch.addcmul(pipe.shift, y, pipe.scale, out=y).contiguous(memory_format=pipe.memory_format)


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_normalised_batches_equal_a_fresh_computation_and_reuse_one_buffer(layout):
    pipe = InputPipeline(torch.device("cpu"), memory_format=layout, mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, 256, (8, 3, 24, 24), dtype=torch.uint8, generator=g) for _ in range(3)]
    outputs = []
    for x in batches:
        out = pipe(x)
        assert torch.equal(out, _fresh(pipe, x)) and out.is_contiguous(memory_format=layout)
        outputs.append(out.data_ptr())
    assert len(set(outputs)) == 1  # one buffer for every batch of this shape
    short = pipe(batches[0][:5])  # the last, short batch of an epoch: its own buffer
    assert short.shape[0] == 5 and torch.equal(short, _fresh(pipe, batches[0][:5]))
    assert pipe(batches[1]).data_ptr() == outputs[0]  # and the full batches keep theirs


def test_a_batch_still_needed_by_a_graph_is_never_overwritten_silently():
    pipe = InputPipeline(torch.device("cpu"), mean=(0.5,) * 3, std=(0.2,) * 3)
    conv = torch.nn.Conv2d(3, 4, 3)
    x = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    loss = conv(pipe(x)).sum()  # the convolution keeps its input for the weight gradient
    pipe(x.flip(0))  # the next batch before this one's backward: the buffer changes under the graph
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_resized_batch_is_its_own_tensor():
    pipe = InputPipeline(torch.device("cpu"), image_size=16, mean=(0.5,) * 3, std=(0.2,) * 3)
    x = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    a, b = pipe(x), pipe(x)
    assert a.shape == (2, 3, 16, 16) and torch.equal(a, b) and a.data_ptr() != b.data_ptr()


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_a_bf16_batch_is_what_a_bf16_autocast_convolution_would_have_cast_itself(layout):
    """The batch written in bf16 is the float32 batch rounded once: a convolution under bf16
    autocast gives the same output, to the bit, from either."""
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    wide = InputPipeline(torch.device("cpu"), memory_format=layout, mean=mean, std=std)
    narrow = InputPipeline(torch.device("cpu"), memory_format=layout, mean=mean, std=std, dtype=torch.bfloat16)
    x = torch.randint(0, 256, (4, 3, 20, 20), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    full, half = wide(x), narrow(x)
    assert half.dtype == torch.bfloat16 and half.is_contiguous(memory_format=layout)
    assert torch.equal(half, full.to(torch.bfloat16))
    assert not torch.equal(half.float(), full)  # the rounding is real: the test would see a missed cast
    conv = torch.nn.Conv2d(3, 8, 4, stride=4).to(memory_format=layout)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(conv(half), conv(full))


def test_a_resized_bf16_batch_is_resized_in_float32_then_cast():
    narrow = InputPipeline(torch.device("cpu"), image_size=16, mean=(0.5,) * 3, std=(0.2,) * 3, dtype=torch.bfloat16)
    wide = InputPipeline(torch.device("cpu"), image_size=16, mean=(0.5,) * 3, std=(0.2,) * 3)
    x = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    assert torch.equal(narrow(x), wide(x).to(torch.bfloat16))


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_a_bf16_batch_written_a_few_images_at_a_time_equals_the_whole_batch_cast(layout, monkeypatch):
    """On a CPU a bf16 batch goes through a small float32 scratch, chunk by chunk: the values
    (and the layout) are those of the whole float32 batch rounded once, however the chunks fall."""
    monkeypatch.setattr(prepare, "CHUNK_BYTES", 4 * 3 * 10 * 10 * 3)  # 3 images a chunk: 7 = 3 + 3 + 1
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    wide = InputPipeline(torch.device("cpu"), memory_format=layout, mean=mean, std=std)
    narrow = InputPipeline(torch.device("cpu"), memory_format=layout, mean=mean, std=std, dtype=torch.bfloat16)
    g = torch.Generator().manual_seed(2)
    for _ in range(2):  # the second batch reuses the scratch and the output buffer
        x = torch.randint(0, 256, (7, 3, 10, 10), dtype=torch.uint8, generator=g)
        half = narrow(x)
        assert half.is_contiguous(memory_format=layout) and torch.equal(half, wide(x).to(torch.bfloat16))
