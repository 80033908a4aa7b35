"""heap_trim: a worker gives the C heap's free pages back to the system once started."""

import ctypes
import sys

import pytest

from django_dbjobs.worker.lifecycle import heap_trim


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_trim_returns_freed_memory_inside_the_heap_to_the_system():
    if not hasattr(ctypes.CDLL(None), "malloc_trim"):
        pytest.skip("this C library has no malloc_trim() (musl)")
    # Blocks past pymalloc's 512 bytes come from the C heap; keeping one in sixteen leaves the
    # freed ones in holes that free() cannot return (only the heap's top goes back by itself).
    blocks = [bytes(4000) for _ in range(8000)]
    kept = blocks[::16]
    del blocks
    before = _rss_kib()
    assert heap_trim.trim() is True
    assert before - _rss_kib() > 10_000, "trim() gave back less than 10 MiB of the 30 MiB freed"
    assert len(kept) == 500


def test_trim_does_nothing_where_the_c_library_has_no_malloc_trim(monkeypatch):
    class NoTrim:
        def __init__(self, name):
            pass

    monkeypatch.setattr(heap_trim.ctypes, "CDLL", NoTrim)
    assert heap_trim.trim() is False


def test_trim_does_nothing_where_the_c_library_cannot_be_opened(monkeypatch):
    def refuse(name):
        raise OSError("no such library")

    monkeypatch.setattr(heap_trim.ctypes, "CDLL", refuse)
    assert heap_trim.trim() is False
