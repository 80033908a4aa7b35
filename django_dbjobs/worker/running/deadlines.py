"""Timeouts: the deadlines of running jobs (``@job(timeout=seconds)``, DBJOBS_DEFAULT_TIMEOUT).

A job thread arms a deadline (none without a timeout) around the job's function (arm(),
and interrupts.disarm() after, in execution._run); the worker's loop (enforce(), on every
pass) interrupts a job past it (interrupts.py). A job still running STUCK_AFTER seconds
after it was interrupted, for whatever reason, is stuck outside Python: no thread can be
killed, so the worker records it and ends its process (stuck.py; its supervisor starts
another; the process's other jobs finish within the grace or are given back).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from . import interrupts
from .interrupts import TIMEOUT, Armed

#: Seconds after the interruption before a job that is still running counts as stuck.
STUCK_AFTER = 5.0

_NEVER = float("inf")
#: The event of each worker loop of this process, and when that loop next looks at the
#: deadlines (monotonic; 0 while it runs its turn, which ends by looking at them): a
#: deadline starting before that sets the event, so no loop sleeps past a deadline.
_loops: dict[threading.Event, float] = {}


def subscribe(event: threading.Event) -> None:
    with interrupts.lock:
        _loops[event] = 0.0


def unsubscribe(event: threading.Event) -> None:
    with interrupts.lock:
        _loops.pop(event, None)


def looks_at(event: threading.Event, when: float) -> None:
    """A worker loop says when it next looks at the deadlines (before it waits)."""
    with interrupts.lock:
        if event in _loops:
            _loops[event] = when


def arm(armed: Armed) -> None:
    """Start the run's deadline and track the run; interrupts.disarm() it after (both in execution._run)."""
    if armed.seconds is None:  # no deadline: only a cancel interrupts it
        armed.deadline = _NEVER
        interrupts.track(armed)
        return
    armed.deadline = time.monotonic() + armed.seconds
    interrupts.track(armed)
    with interrupts.lock:  # a loop asleep past the deadline is woken (it then sees the run)
        late = [event for event, when in _loops.items() if when > armed.deadline]
    for event in late:
        event.set()


def due_in() -> float | None:
    """Seconds until the next deadline or stuck check, or None when no job has a deadline."""
    with interrupts.lock:
        runs = interrupts.tracked()
        if not runs:
            return None
        now = time.monotonic()
        times = [
            a.deadline if a.interrupted_at is None else a.interrupted_at + STUCK_AFTER
            for a in runs
            # Reported already, or no deadline: nothing to do for it.
            if not a.stuck and (a.seconds is not None or a.interrupted_at is not None)
        ]
    return max(min(times) - now, 0.0) if times else None


def enforce(on_stuck: Callable[[Armed], None]) -> None:
    """Interrupt the jobs past their deadline; call `on_stuck` once for each that will not stop."""
    now = time.monotonic()
    stuck = []
    with interrupts.lock:
        for armed in interrupts.tracked():
            if armed.interrupted_at is None and now >= armed.deadline:
                interrupts.interrupt(armed, TIMEOUT, now)
            elif (
                armed.interrupted_at is not None
                and not armed.stuck
                and now >= armed.interrupted_at + STUCK_AFTER
            ):
                armed.stuck = True
                stuck.append(armed)
    for armed in stuck:
        on_stuck(armed)
