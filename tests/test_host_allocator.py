"""``techniques.cpu_allocator``: glibc told to keep freed memory (``retain``), only where it can
act (a CPU run under glibc), through the run's set-up, and with the effect it is for: a block freed
stays in the process for the next allocation instead of going back to the kernel."""

from __future__ import annotations

import ctypes
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
    import ctypes, sys, torch
    from quicktrain.techniques.cpu.allocator import resolve_host_allocator
    if sys.argv[1] == "retain":
        assert resolve_host_allocator("retain", torch.device("cpu")).apply()
    class Info(ctypes.Structure):  # glibc's struct mallinfo2, every field a size_t
        _fields_ = [(name, ctypes.c_size_t) for name in
                    "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Info
    def books():
        info = libc.mallinfo2()
        return info.arena, info.uordblks, info.hblkhd  # heap bytes, of them in use; bytes mmapped apart
    before = books()
    block = torch.ones(16 * 2**20)  # 64 MB
    alive = books()
    del block
    print(*before, *alive, *books())
    """
)

MB = 2**20


def _glibc_accounts(mode: str) -> list[tuple[int, int, int]]:
    """glibc's own accounting (``mallinfo2``) around a 64 MB tensor: (bytes in the heap, of them
    in use, bytes mmapped apart) before it is allocated, while it is alive and after it is freed."""
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True).stdout
    numbers = [int(n) for n in out.split()[-9:]]
    return [tuple(numbers[i : i + 3]) for i in (0, 3, 6)]


@pytest.mark.skipif(not GLIBC or not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="glibc >= 2.33's mallinfo2")
def test_a_freed_block_stays_in_the_heap_for_the_next_step():
    """The mechanism, in glibc's own books rather than the kernel's fault counter (which the
    kernel can raise for its own reasons, e.g. NUMA balancing unmapping pages to sample them):
    with ``retain`` a 64 MB block comes from the heap and stays there once freed, ready for the
    next allocation with its pages in place; glibc's default maps it apart and unmaps it on free."""
    before, alive, freed = _glibc_accounts("retain")  # each (heap, in use, mapped apart)
    assert alive[2] == before[2] and alive[1] >= before[1] + 64 * MB  # served from the heap
    assert freed[1] < alive[1] - 60 * MB and freed[0] == alive[0] and freed[2] == before[2]  # freed, kept
    before, alive, freed = _glibc_accounts("system")
    assert alive[2] >= before[2] + 64 * MB and alive[1] < before[1] + MB  # mapped apart
    assert freed[2] == before[2]  # and handed back to the kernel on free
