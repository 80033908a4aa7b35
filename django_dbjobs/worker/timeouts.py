"""Job timeouts: ``@job(timeout=seconds)`` and DBJOBS_DEFAULT_TIMEOUT.

A job thread arms a deadline around the job's function (arm() and disarm(), in
execution._run); the worker's loop
(enforce(), on every pass) interrupts a job past it. A thread is interrupted by raising
JobTimeout in it (``PyThreadState_SetAsyncExc``): that lands between two Python
bytecodes, so Python code is interrupted at once, and a call blocked in C code (a socket
read without a timeout, ``time.sleep()``) only when it returns to Python. An async job is
interrupted by cancelling its task. A job still running STUCK_AFTER seconds after it was
interrupted is stuck outside Python: no thread can be killed, so the worker records the
timeout and ends its process (stuck.py; its supervisor starts another; the process's
other jobs finish within the grace or are given back).

JobTimeout derives from BaseException, like KeyboardInterrupt: ``except Exception`` in a
job does not swallow it. Like any asynchronous exception it can land anywhere in the job's
Python code, in a library's too: code that takes a lock and is interrupted before its
``try`` keeps it (see the worker docs).
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections

from ..exceptions import JobTimeout
from . import async_jobs

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

    @classmethod
    def for_job(cls, job, seconds: float, is_async: bool = False) -> Armed:
        """A deadline for the job about to run on this thread; arm() starts it."""
        return cls(job, threading.get_ident(), seconds, 0.0, is_async)


_armed: dict[int, Armed] = {}  # by thread ident
_lock = threading.Lock()
#: The event of each worker loop of this process, and when that loop next looks at the
#: deadlines (monotonic; 0 while it runs its turn, which ends by looking at them): a
#: deadline starting before that sets the event, so no loop sleeps past a deadline.
_loops: dict[threading.Event, float] = {}


def subscribe(event: threading.Event) -> None:
    with _lock:
        _loops[event] = 0.0


def unsubscribe(event: threading.Event) -> None:
    with _lock:
        _loops.pop(event, None)


def looks_at(event: threading.Event, when: float) -> None:
    """A worker loop says when it next looks at the deadlines (before it waits)."""
    with _lock:
        if event in _loops:
            _loops[event] = when


def arm(armed: Armed) -> None:
    """Start the deadline; disarm() it after the run (both in execution._run)."""
    armed.deadline = time.monotonic() + armed.seconds
    with _lock:
        _armed[armed.thread] = armed
        late = [event for event, when in _loops.items() if when > armed.deadline]
    for event in late:
        event.set()


def disarm(armed: Armed) -> None:
    """End the deadline; clear an interruption sent but not delivered, or swallow one landing here.

    Each deadline is interrupted once at most, so the loop ends: whatever lands while it
    runs was the one interruption.
    """
    while True:
        try:
            with _lock:
                if _armed.get(armed.thread) is armed:
                    del _armed[armed.thread]
            if armed.interrupted_at is not None and not armed.is_async:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(armed.thread), ctypes.c_void_p(None)
                )
            return
        except JobTimeout:
            continue


def outcome(armed: Armed, failure: BaseException | None, returned: bool) -> BaseException | None:
    """The failure to record for a run that was interrupted (its connections reset).

    A run whose function had returned keeps its outcome: the interruption met the finish.
    Otherwise the failure is a JobTimeout with a message, and the traceback of where the
    job was when it was interrupted.
    """
    if returned and isinstance(failure, JobTimeout | type(None)):
        return None
    if not returned:
        _reset_connections()  # whatever the job made of the interruption, it may have hit one
    if isinstance(failure, JobTimeout | asyncio.CancelledError):
        message = f"the job ran longer than its timeout of {armed.seconds:g}s and was interrupted"
        return JobTimeout(message).with_traceback(failure.__traceback__)
    return failure


def _reset_connections() -> None:
    """Close this thread's connections: the interruption may have landed inside transaction code."""
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:  # left mid-way by the interruption: start afresh
            connection.atomic_blocks.clear()
            connection.savepoint_ids.clear()
            connection.in_atomic_block = False
            connection.needs_rollback = False
            connection.closed_in_transaction = False
        connection.run_on_commit = []
        connection.close()


def due_in() -> float | None:
    """Seconds until the next deadline or stuck check, or None when no job has a deadline."""
    with _lock:
        if not _armed:
            return None
        now = time.monotonic()
        times = [
            a.deadline if a.interrupted_at is None else a.interrupted_at + STUCK_AFTER
            for a in _armed.values()
            if not a.stuck  # reported already: nothing more to do for it
        ]
    return max(min(times) - now, 0.0) if times else None


def enforce(on_stuck: Callable[[Armed], None]) -> None:
    """Interrupt the jobs past their deadline; call `on_stuck` once for each that will not stop."""
    now = time.monotonic()
    stuck = []
    with _lock:
        for armed in _armed.values():
            if armed.interrupted_at is None and now >= armed.deadline:
                armed.interrupted_at = now
                if armed.is_async:
                    if not async_jobs.cancel(armed.job.pk):
                        armed.interrupted_at = None  # its task has not started yet: next pass
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
