"""Interrupting running jobs: timeouts (``@job(timeout=seconds)``, DBJOBS_DEFAULT_TIMEOUT) and cancels.

A job thread arms a deadline (none without a timeout) around the job's function (arm() and disarm(), in
execution._run); the worker's loop
(enforce(), on every pass) interrupts a job past it. A thread is interrupted by raising
JobTimeout in it (``PyThreadState_SetAsyncExc``): that lands between two Python
bytecodes, so Python code is interrupted at once, and a call blocked in C code (a socket
read without a timeout, ``time.sleep()``) only when it returns to Python. An async job is
interrupted by cancelling its task. A job still running STUCK_AFTER seconds after it was
interrupted is stuck outside Python: no thread can be killed, so the worker records the
timeout and ends its process (stuck.py; its supervisor starts another; the process's
other jobs finish within the grace or are given back). A cancel request (cancel()) interrupts
a job the same way, with JobCancelled, whatever its deadline.

JobTimeout and JobCancelled derive from BaseException, like KeyboardInterrupt: ``except Exception`` in a
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

from django.db import connections

from ..exceptions import JobCancelled, JobInterrupted, JobTimeout
from . import async_jobs

#: Seconds after the interruption before a job that is still running counts as stuck.
STUCK_AFTER = 5.0


#: Why a job was interrupted.
TIMEOUT, CANCEL, LOST = "timeout", "cancel", "lost"


class Armed:
    """One run of a job on a job thread: its deadline (if any) and whether it was interrupted.

    A plain class with __slots__: one is made for every job, timeout or not (a cancel may
    interrupt any), so it must cost next to nothing.
    """

    __slots__ = (
        "job",
        "thread",
        "seconds",
        "deadline",
        "is_async",
        "interrupted_at",
        "stuck",
        "reason",
        "interruptible",
    )

    def __init__(
        self,
        job,
        thread: int,
        seconds: float | None,
        deadline: float = 0.0,
        is_async: bool = False,
        interruptible: bool = True,
    ):
        self.job = job
        self.thread = thread
        #: The timeout; None: no deadline (the job can still be cancelled).
        self.seconds = seconds
        self.deadline = deadline
        self.is_async = is_async
        self.interrupted_at: float | None = None
        self.stuck = False
        #: TIMEOUT or CANCEL, once interrupted.
        self.reason: str | None = None
        #: False: a cancel request only sets the job's flag (@job(interruptible=False)).
        self.interruptible = interruptible

    @classmethod
    def for_job(cls, job, seconds: float | None, is_async: bool = False, interruptible: bool = True) -> Armed:
        """A deadline (or none) for the job about to run on this thread; arm() starts it."""
        return cls(job, threading.get_ident(), seconds, 0.0, is_async, interruptible)


_NEVER = float("inf")
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
    if armed.seconds is None:  # no deadline: only a cancel interrupts it
        armed.deadline = _NEVER
        with _lock:
            _armed[armed.thread] = armed
        return
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
        except JobInterrupted:
            continue


def outcome(armed: Armed, failure: BaseException | None, returned: bool) -> BaseException | None:
    """The failure to record for a run that was interrupted (its connections reset).

    A run whose function had returned keeps its outcome: the interruption met the finish.
    Otherwise the failure is a JobTimeout with a message, and the traceback of where the
    job was when it was interrupted.
    """
    if returned and isinstance(failure, JobInterrupted | type(None)):
        return None
    if not returned:
        _reset_connections()  # whatever the job made of the interruption, it may have hit one
    if armed.reason == LOST:
        return JobInterrupted("this worker lost the job (a sweep gave it back) and interrupted it")
    if armed.reason == CANCEL:
        # Whatever it raised on the way out: it stopped because it was asked to, and is not retried.
        cancelled = JobCancelled("the job was cancelled while it ran and was interrupted")
        return cancelled.with_traceback(getattr(failure, "__traceback__", None))
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
            # Reported already, or no deadline: nothing to do for it.
            if not a.stuck and (a.seconds is not None or a.interrupted_at is not None)
        ]
    return max(min(times) - now, 0.0) if times else None


def enforce(on_stuck: Callable[[Armed], None]) -> None:
    """Interrupt the jobs past their deadline; call `on_stuck` once for each that will not stop."""
    now = time.monotonic()
    stuck = []
    with _lock:
        for armed in _armed.values():
            if armed.interrupted_at is None and now >= armed.deadline:
                _interrupt(armed, TIMEOUT, now)
            elif (
                armed.interrupted_at is not None
                and not armed.stuck
                and now >= armed.interrupted_at + STUCK_AFTER
            ):
                armed.stuck = True
                stuck.append(armed)
    for armed in stuck:
        on_stuck(armed)


def _interrupt(armed: Armed, reason: str, now: float) -> None:
    """Raise the interruption in the job's thread, or cancel its task (under _lock)."""
    armed.interrupted_at, armed.reason = now, reason
    if armed.is_async:
        if not async_jobs.cancel(armed.job.pk):
            armed.interrupted_at = armed.reason = None  # its task has not started yet: next pass
    else:
        error = {CANCEL: JobCancelled, TIMEOUT: JobTimeout}.get(reason, JobInterrupted)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(armed.thread), ctypes.py_object(error))


def cancel(job_pk: str) -> bool:
    """Interrupt the running job `job_pk` because its cancellation was requested.

    False when it is not running here (not started yet, or done), or not interruptible, or
    its task has not started (the caller tries again). A job interrupted already (its
    timeout) is left to that interruption.
    """
    with _lock:
        for armed in _armed.values():
            if armed.job.pk == job_pk and armed.interruptible and armed.interrupted_at is None:
                _interrupt(armed, CANCEL, time.monotonic())
                return armed.interrupted_at is not None
    return False


def running() -> list:
    """The jobs running on this process's job threads (their pickups, as claimed)."""
    with _lock:
        return [armed.job for armed in _armed.values()]


def stop_lost(job) -> bool:
    """Interrupt this run of `job` (the very object claimed), which this worker lost or gave back.

    Matched by identity, not id: a worker that claimed the job again after losing it runs
    another pickup of it, which must go on.
    """
    with _lock:
        for armed in _armed.values():
            if armed.job is job and armed.interrupted_at is None:
                _interrupt(armed, LOST, time.monotonic())
                return armed.interrupted_at is not None
    return False


def interrupted_for_cancel(armed: Armed) -> bool:
    return armed.reason == CANCEL
