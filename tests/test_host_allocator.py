"""``techniques.cpu_allocator``: glibc told to keep freed memory (``retain``), only where it can
act (a CPU run under glibc), through the run's set-up, and with the effect it is for: a block freed
and allocated again does not page-fault back in."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import tiny_config

from quicktrain.engine import train
from quicktrain.techniques.cpu import allocator as host_memory
from quicktrain.techniques.cpu.allocator import M_MMAP_MAX, M_TRIM_THRESHOLD, NEVER_TRIM, resolve_host_allocator

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


class FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


@pytest.fixture
def fake_libc(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(host_memory, "_glibc", lambda: libc)
    return libc


def test_only_retain_on_a_cpu_under_glibc_acts(fake_libc, monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_host_allocator("system", cpu).active is False
    assert resolve_host_allocator("retain", cpu).active is True
    on_gpu = resolve_host_allocator("retain", cuda)
    assert on_gpu.active is False and on_gpu.note == "CPU-only"
    monkeypatch.setattr(host_memory, "_glibc", lambda: None)
    elsewhere = resolve_host_allocator("retain", cpu)
    assert elsewhere.active is False and "glibc" in elsewhere.note
    assert elsewhere.apply() is False and fake_libc.calls == []


def test_apply_turns_off_mmap_and_trimming(fake_libc):
    assert resolve_host_allocator("retain", torch.device("cpu")).apply() is True
    assert fake_libc.calls == [(M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, NEVER_TRIM)]
    fake_libc.calls.clear()
    assert resolve_host_allocator("system", torch.device("cpu")).apply() is False
    assert fake_libc.calls == []


def test_a_refusal_is_said_not_hidden(monkeypatch, quicktrain_log):
    libc = FakeLibc(answer=0)
    monkeypatch.setattr(host_memory, "_glibc", lambda: libc)
    assert resolve_host_allocator("retain", torch.device("cpu")).apply() is False
    assert "refused" in quicktrain_log.text


def test_a_run_applies_it_before_loading_and_records_it(tmp_path, fake_libc, monkeypatch, quicktrain_log):
    """Through ``train``: set before the data loads, in the record and the banner; the
    arithmetic is the allocator's business only (the same loss as a ``system`` run)."""
    import quicktrain.engine.setup as setup

    loaded = setup.load_arrays
    seen_at_load: list[int] = []

    def load_arrays(*args, **kwargs):
        seen_at_load.append(len(fake_libc.calls))
        return loaded(*args, **kwargs)

    monkeypatch.setattr(setup, "load_arrays", load_arrays)
    losses = {}
    for mode in ("system", "retain"):
        torch.manual_seed(0)
        result = train(tiny_config(tmp_path / mode, **{"techniques.cpu_allocator": mode}))
        assert result.summary["cpu_allocator"] == mode
        assert result.summary["cpu_allocator_active"] is (mode == "retain")
        losses[mode] = result.summary["test_loss"]
    assert seen_at_load == [0, 2]  # the retain run's two mallopt calls came before its data
    assert losses["retain"] == losses["system"]
    assert "freed memory retained (glibc)" in quicktrain_log.text


CHILD = textwrap.dedent(
    """
    import resource, sys, torch
    from quicktrain.techniques.cpu.allocator import resolve_host_allocator
    if sys.argv[1] == "retain":
        assert resolve_host_allocator("retain", torch.device("cpu")).apply()
    def faults_of_a_fresh_block():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = torch.ones(16 * 2**20)  # 64 MB, written through
        del block
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    faults_of_a_fresh_block()  # the first time, every allocator faults the pages in
    print(min(faults_of_a_fresh_block() for _ in range(3)))
    """
)


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True).stdout
    return int(out.split()[-1])


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator")
def test_retained_blocks_come_back_without_page_faults():
    """A 64 MB block allocated again after it was freed: with ``retain`` its pages are still
    there (a 4 KB page per fault would be 16,384 faults); glibc's default maps it afresh."""
    assert _faults("retain") < 200
    system = _faults("system")
    if system < 1000:  # huge pages by default (THP "always"): 2 MB per fault, no contrast to show
        pytest.skip(f"glibc's default took only {system} faults for 64 MB here")
    assert system > 10_000
