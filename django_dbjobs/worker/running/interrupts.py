"""Interrupting a run on a job thread, for a timeout, a cancel or a lost job alike.

Every run of a job on this process's job threads is tracked here (an Armed). A thread is
interrupted by raising JobTimeout, JobCancelled or JobInterrupted in it
(``PyThreadState_SetAsyncExc``): that lands between two Python bytecodes, so Python code
is interrupted at once, and a call blocked in C code (a socket read without a timeout,
``time.sleep()``) only when it returns to Python. An async job is interrupted by
cancelling its task. When a run is interrupted is for deadlines.py (timeouts), the cancel
watch (cancel_watch.py: cancel()) and the lease (stop_lost()) to say; a run that will not
stop is stuck.py's.

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

from django.db import connections

from ...exceptions import JobCancelled, JobInterrupted, JobTimeout
from . import async_jobs

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
        """A deadline (or none) for the job about to run on this thread; deadlines.arm() starts it."""
        return cls(job, threading.get_ident(), seconds, 0.0, is_async, interruptible)


_armed: dict[int, Armed] = {}  # by thread ident
#: Guards the runs tracked here (and deadlines.py's loops).
lock = threading.Lock()


def track(armed: Armed) -> None:
    """Track a run about to start on this thread (deadlines.arm()); disarm() ends it."""
    with lock:
        _armed[armed.thread] = armed


def tracked() -> list[Armed]:
    """The runs tracked now (call under `lock` to act on them)."""
    return list(_armed.values())


def disarm(armed: Armed) -> None:
    """End the deadline; clear an interruption sent but not delivered, or swallow one landing here.

    Each deadline is interrupted once at most, so the loop ends: whatever lands while it
    runs was the one interruption.
    """
    while True:
        try:
            with lock:
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


def interrupt(armed: Armed, reason: str, now: float) -> None:
    """Raise the interruption in the job's thread, or cancel its task (under `lock`)."""
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
    with lock:
        for armed in _armed.values():
            if armed.job.pk == job_pk and armed.interruptible and armed.interrupted_at is None:
                interrupt(armed, CANCEL, time.monotonic())
                return armed.interrupted_at is not None
    return False


def running() -> list:
    """The jobs running on this process's job threads (their pickups, as claimed)."""
    with lock:
        return [armed.job for armed in _armed.values()]


def stop_lost(job) -> bool:
    """Interrupt this run of `job` (the very object claimed), which this worker lost or gave back.

    Matched by identity, not id: a worker that claimed the job again after losing it runs
    another pickup of it, which must go on.
    """
    with lock:
        for armed in _armed.values():
            if armed.job is job and armed.interrupted_at is None:
                interrupt(armed, LOST, time.monotonic())
                return armed.interrupted_at is not None
    return False


def interrupted_for_cancel(armed: Armed) -> bool:
    return armed.reason == CANCEL
