"""Wake idle workers when jobs are committed.

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
import time
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError, connections

from . import db

logger = logging.getLogger("django_dbjobs")

CHANNEL = "dbjobs"
_subscribers: set[threading.Event] = set()
_generation = 0
_schedule_generation = 0
#: The NOTIFY payload a trigger sends when a schedule is saved or deleted (PostgreSQL).
SCHEDULES_PAYLOAD = "schedules"
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


class Listener(threading.Thread):
    """PostgreSQL: LISTEN on a connection of its own; set `event` on every NOTIFY.

    Reconnects after the server restarts or the connection drops, and wakes the
    worker once then, since notifications sent meanwhile are lost.
    """

    def __init__(self, using: str, event: threading.Event):
        super().__init__(name="dbjobs-listener", daemon=True)
        self.using = using
        self.event = event
        self.listening = threading.Event()
        self._stop_event = threading.Event()

    def run(self) -> None:
        pause = 0.5
        connection = connections[self.using]
        try:
            while not self._stop_event.is_set():
                try:
                    connection.ensure_connection()
                    with connection.cursor() as cursor:
                        cursor.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    self.event.set()  # notifications sent while disconnected are lost:
                    schedules_changed()  # look again for jobs and schedules
                    pause = 0.5
                    while not self._stop_event.is_set():
                        for notification in connection.connection.notifies(timeout=0.25):
                            if notification.payload == SCHEDULES_PAYLOAD:
                                schedules_changed()
                            self.event.set()
                except Exception as exc:  # noqa: BLE001 - any failure: reconnect
                    self.listening.clear()
                    if self._stop_event.is_set():
                        break
                    logger.warning("LISTEN connection lost, reconnecting in %.1fs: %s", pause, exc)
                    connection.close()
                    self._stop_event.wait(pause)
                    pause = min(pause * 2, 30.0)
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop_event.set()


class IdleWaiter:
    """How an idle worker waits for new jobs from other processes, per database."""

    def __init__(
        self,
        using: str,
        event: threading.Event,
        queues: list[str] | None,
        paused: Callable[[], frozenset[str]] = frozenset,
    ):
        self.using = using
        self.event = event
        self.queues = queues
        #: The paused queues among this worker's, as its claims last read them: the probe
        #: must not take their jobs for work, or a paused backlog would wake it for nothing.
        self.paused = paused
        self.steps = db.idle_check_steps(using)
        self.data_version = db.uses_data_version(using)
        self.listener: Listener | None = None
        self._data_version: int | None = None

    def start(self) -> None:
        if db.supports_listen(self.using):
            self.listener = Listener(self.using, self.event)
            self.listener.start()

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.stop()
            self.listener.join(3)

    def wait(self, timeout: float, probe: bool = True) -> bool:
        """Wait up to `timeout` seconds; return True if there may be new work.

        Without `probe`, only this process's wake-ups end the wait early (the worker
        has no free thread, so other processes' new jobs can wait).
        """
        steps = self.steps
        if steps is None or self.listener is not None or not probe:
            woken = self.event.wait(timeout)
            self.event.clear()
            return woken
        step, longest = steps
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            if self.event.wait(min(step, remaining)):
                self.event.clear()
                return True
            if self._changed():
                return True
            step = min(step * 1.5, longest)
        return False

    def _changed(self) -> bool:
        try:
            if self.data_version:
                version = db.data_version(self.using)
                changed = self._data_version is not None and version != self._data_version
                self._data_version = version
                return changed
            from .models import Job

            paused = self.paused()
            if paused and not self.queues:
                # Telling a paused backlog from other work means reading each paused job:
                # while queues are paused, the poll interval brings the next look instead.
                return False
            queues = [name for name in self.queues or [] if name not in paused]
            if self.queues and not queues:
                return False  # every queue of this worker is paused
            return Job.objects.using(self.using).due().for_queues(queues).exists()
        except (DatabaseError, InterfaceError):
            return True  # let the claim meet the error and back off
