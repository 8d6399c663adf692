"""Pinned memory: pinned batches and non-blocking copies with CUDA; without it, unpinned batches and
blocking copies, said once and recorded as inactive (not an error)."""

import pytest
import torch
from conftest import tiny_config

from quicktrain.data.loader import make_loader
from quicktrain.data.prepare import InputPipeline
from quicktrain.data.synthetic import make_synthetic
from quicktrain.engine import train
from quicktrain.engine.setup import build_run
from quicktrain.techniques.pinning import resolve_pinning


def test_pinning_on_cpu_does_nothing_and_says_why():
    asked = resolve_pinning(True, torch.device("cpu"))
    assert asked.requested and not asked.active
    assert "no effect" in asked.note
    not_asked = resolve_pinning(False, torch.device("cpu"))
    assert not not_asked.requested and not not_asked.active and not_asked.note == ""


def test_a_pin_request_on_cpu_builds_unpinned_loaders_and_blocking_copies(tmp_path):
    """What the run actually does with the request, not only what its record echoes."""
    # run.device=cpu: on a GPU machine "auto" would pick CUDA, where pinning is active
    cfg = tiny_config(tmp_path / "run", **{"techniques.pin_memory": True, "run.device": "cpu"})
    run = build_run(cfg, progress=False)
    assert run.techniques.pinning.requested and not run.techniques.pinning.active
    for loader in (run.train_loader, run.test_loader):
        assert loader.pin_memory is False
    assert run.state.inputs.non_blocking is False
    x, y = next(iter(run.train_loader))
    assert not x.is_pinned() and not y.is_pinned()
    result = train(cfg)
    assert result.summary["pin_memory"] is True and result.summary["pin_memory_active"] is False


def test_input_pipeline_delivers_normalised_batches_to_its_device():
    split = make_synthetic(num_train=16, num_test=1).train
    loader = make_loader(split, batch_size=8, train=True, seed=0)
    pipeline = InputPipeline(torch.device("cpu"), image_size=48, memory_format=torch.channels_last)
    x, y = pipeline.to_device(next(iter(loader)))
    assert x.dtype == torch.uint8 and x.shape == (8, 3, 32, 32) and y.shape == (8,)
    out = pipeline(x)
    assert out.dtype == torch.float32 and out.shape == (8, 3, 48, 48)
    assert out.is_contiguous(memory_format=torch.channels_last)
    # normalisation: (x / 255 - mean) / std, per channel
    plain = InputPipeline(torch.device("cpu"))(x)
    expected = (x.float() / 255 - torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)) / torch.tensor(
        [0.2470, 0.2435, 0.2616]
    ).view(1, 3, 1, 1)
    torch.testing.assert_close(plain, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs a CUDA device")
def test_pinned_loader_and_non_blocking_copy_on_cuda():
    device = torch.device("cuda")
    pin = resolve_pinning(True, device)
    assert pin.active and pin.note == ""
    split = make_synthetic(num_train=16, num_test=1).train
    loader = make_loader(split, batch_size=8, train=True, seed=0, pin=True)
    batch = next(iter(loader))
    assert batch[0].is_pinned() and batch[1].is_pinned()
    x, y = InputPipeline(device, non_blocking=True).to_device(batch)
    assert x.is_cuda and y.is_cuda
    torch.testing.assert_close(x.cpu(), batch[0])  # the asynchronous copy arrived whole


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs a CUDA device")
def test_a_cuda_run_with_pinning_builds_pinned_loaders_and_copies_without_blocking(tmp_path):
    cfg = tiny_config(tmp_path / "run", **{"techniques.pin_memory": True, "run.device": "cuda"})
    run = build_run(cfg, progress=False)
    assert run.techniques.pinning.active and run.train_loader.pin_memory and run.state.inputs.non_blocking
    x, _ = next(iter(run.train_loader))
    assert x.is_pinned()
