"""Job timeouts: ``@job(timeout=seconds)`` and DBJOBS_DEFAULT_TIMEOUT.

A job thread arms a deadline around the job's function (guard()); the worker's loop
(enforce(), on every pass) interrupts a job past it. A thread is interrupted by raising
JobTimeout in it (``PyThreadState_SetAsyncExc``): that lands between two Python
bytecodes, so Python code is interrupted at once, and a call blocked in C code (a socket
read without a timeout, ``time.sleep()``) only when it returns to Python. An async job is
interrupted by cancelling its task. A job still running STUCK_AFTER seconds after it was
interrupted is stuck outside Python: no thread can be killed, so the worker records the
timeout and, under ``run_jobs --processes``, ends its process (the supervisor starts
another; the process's other jobs finish within the grace or are given back).

JobTimeout derives from BaseException, like KeyboardInterrupt: ``except Exception`` in a
job does not swallow it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import async_jobs
from .exceptions import JobTimeout

#: Seconds after the interruption before a job that is still running counts as stuck.
STUCK_AFTER = 5.0


@dataclass
class Armed:
    job: object
    thread: int
    seconds: float
    deadline: float
    is_async: bool = False
    interrupted_at: float | None = None
    stuck: bool = False


_armed: dict[int, Armed] = {}  # by thread ident
_lock = threading.Lock()


@contextlib.contextmanager
def guard(job, seconds: float | None, is_async: bool = False) -> Iterator[None]:
    """Run the block (the job's function) under a deadline of `seconds`; None: no deadline.

    Raises JobTimeout, with a message, if the job was interrupted. An interruption that
    lands after the function returned (the deadline met the finish) is swallowed.
    """
    if not seconds:
        yield
        return
    ident = threading.get_ident()
    armed = Armed(job, ident, seconds, time.monotonic() + seconds, is_async)
    with _lock:
        _armed[ident] = armed
    try:
        yield
    except JobTimeout as exc:
        raise JobTimeout(_message(seconds)).with_traceback(exc.__traceback__) from None
    except asyncio.CancelledError as exc:
        if armed.interrupted_at is None:
            raise
        raise JobTimeout(_message(seconds)).with_traceback(exc.__traceback__) from None
    finally:
        _settle(ident)


def _message(seconds: float) -> str:
    return f"the job ran longer than its timeout of {seconds:g}s and was interrupted"


def _settle(ident: int) -> None:
    """Disarm; clear an interruption sent but not yet delivered, or swallow it if it lands here."""
    while True:
        try:
            with _lock:
                _armed.pop(ident, None)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.c_void_p(None))
            return
        except JobTimeout:
            continue


def due_in() -> float | None:
    """Seconds until the next deadline or stuck check, or None when no job has a deadline."""
    with _lock:
        if not _armed:
            return None
        now = time.monotonic()
        times = [
            a.deadline if a.interrupted_at is None else a.interrupted_at + STUCK_AFTER
            for a in _armed.values()
        ]
    return max(min(times) - now, 0.0)


def enforce(on_stuck: Callable[[Armed], None]) -> None:
    """Interrupt the jobs past their deadline; call `on_stuck` once for each that will not stop."""
    now = time.monotonic()
    stuck = []
    with _lock:
        for armed in _armed.values():
            if armed.interrupted_at is None and now >= armed.deadline:
                armed.interrupted_at = now
                if armed.is_async:
                    async_jobs.cancel(armed.job.pk)
                else:
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(armed.thread), ctypes.py_object(JobTimeout)
                    )
            elif (
                armed.interrupted_at is not None
                and not armed.stuck
                and now >= armed.interrupted_at + STUCK_AFTER
            ):
                armed.stuck = True
                stuck.append(armed)
    for armed in stuck:
        on_stuck(armed)
