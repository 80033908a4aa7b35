"""Wake idle workers when jobs are committed (how an idle worker waits: worker/lifecycle/idle_wait.py).

In one process, enqueue() calls notify() on commit, which sets the event of every
worker of this process. Across processes each database has its cheapest signal:
PostgreSQL sends NOTIFY from a trigger (delivered on commit only) to a LISTEN
connection per worker; SQLite bumps ``PRAGMA data_version`` when another connection
commits; MySQL/MariaDB get a cheap indexed probe at a short, adaptive interval.
Workers also poll, so a lost wake-up costs at most one poll interval; none of this
is needed for correctness.
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger("django_dbjobs")

_subscribers: set[threading.Event] = set()
_generation = 0
_schedule_generation = 0
_lock = threading.Lock()


def notify() -> None:
    """Wake the workers of this process (enqueue() calls it on commit)."""
    _wake(jobs=1)


def schedules_changed() -> None:
    """A schedule was saved or deleted (in this process, or in another on PostgreSQL): re-read them."""
    _wake(schedules=1)


def _wake(jobs: int = 0, schedules: int = 0) -> None:
    global _generation, _schedule_generation
    with _lock:
        _generation += jobs
        _schedule_generation += schedules
        subscribers = list(_subscribers)
    for event in subscribers:
        event.set()


def schedule_generation() -> int:
    """How many schedule changes this process has heard of; schedulers compare it."""
    return _schedule_generation


def generation() -> int:
    """How many wake-ups this process has sent; tests compare it before and after."""
    return _generation


def subscribe(event: threading.Event) -> None:
    with _lock:
        _subscribers.add(event)


def unsubscribe(event: threading.Event) -> None:
    with _lock:
        _subscribers.discard(event)
