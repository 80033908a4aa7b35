"""Giving the C heap's free pages back to the system once a worker has started (glibc's malloc_trim()).

Starting a worker allocates and frees memory it never needs again: Python compiles every
module it imports without a cached ``.pyc`` (``PYTHONDONTWRITEBYTECODE``, a project's own
modules), the system checks and the migration check build objects once. glibc keeps the
freed memory inside its heap, in pages the process goes on paying for: ``free()`` gives
back only the heap's top. ``malloc_trim(0)`` gives back every free page of every arena
(0.2 ms). Measured on PostgreSQL (2026-12-06, bench/history.rst): an idle ``run_jobs
--concurrency 2`` 1.2 MiB smaller where modules are compiled from source, 0.1 MiB with
cached bytecode. Where the C library has no such call (musl, macOS, Windows) nothing is done.
"""

from __future__ import annotations

import ctypes


def _malloc_trim():
    """glibc's malloc_trim(), or None where the C library has none."""
    try:
        return ctypes.CDLL(None).malloc_trim  # the symbols the process is linked with
    except (OSError, TypeError, AttributeError):  # no such symbol; CDLL(None) unsupported (Windows)
        return None


def trim() -> bool:
    """Return the free pages of the C heap to the system; False where that cannot be done."""
    malloc_trim = _malloc_trim()
    if malloc_trim is None:
        return False
    malloc_trim.argtypes, malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    malloc_trim(0)
    return True
