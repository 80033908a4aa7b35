"""Riding out database outages: retry with a growing pause instead of crashing.

Only outages are waited out (errors.error_kind(): the server went away, a lock timeout,
a deadlock, a serialization failure). An error caused by a value is raised to the
caller, which fails the one job it belongs to; a missing table or column is raised
as MissingMigrations. Every pause ends early when the worker is told to stop at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, connections

from ..exceptions import MissingMigrations
from .errors import ErrorKind, error_kind

logger = logging.getLogger("django_dbjobs")

T = TypeVar("T")

#: First and longest pause between tries while the database is unreachable.
FIRST_PAUSE = 0.5
MAX_PAUSE = 30.0


class Outage:
    """Backoff through database outages: 0.5 s doubling to 30 s, reset on success.

    `forced` is set when the worker must stop at once: a pause then ends, and a
    failing call gives up (returns None) without pausing. `wake` cuts short the
    single pause of a call made with ``once=True``, so the claim loop can react to new
    work or a stop; `looks_at(wake, when)` is told when that pause ends (the worker's
    deadlines.looks_at: a job deadline due sooner cuts it short), and 0.0 after it.
    """

    def __init__(
        self,
        using: str,
        on_error: Callable[[], None] = lambda: None,
        forced: threading.Event | None = None,
        wake: threading.Event | None = None,
        looks_at: Callable[[threading.Event, float], None] = lambda wake, when: None,
    ):
        self.using = using
        self.on_error = on_error
        self.forced = forced or threading.Event()
        self.wake = wake or threading.Event()
        self.looks_at = looks_at
        self.pause = FIRST_PAUSE

    def call(self, action: Callable[[], T], what: str, once: bool = False) -> T | None:
        """Run `action`, retrying with backoff while the database is down.

        With `once` it pauses a single time (a wake cuts the pause short) and returns
        None, so the caller can move on; when the worker is forced to stop it returns
        None at once.
        Raises the errors that are not outages: MissingMigrations for a missing table or
        column, the database's own error for a value it refuses.
        """
        while True:
            try:
                result = action()
            except (DatabaseError, InterfaceError) as exc:
                kind = error_kind(exc, self.using)
                if kind is ErrorKind.OUTAGE:
                    _close(self.using)  # opened again on next use; it may be dead or mid-transaction
                else:
                    close_broken_connections()
                if kind is ErrorKind.SETUP:
                    raise MissingMigrations(
                        f"The database {self.using!r} is missing django_dbjobs tables or columns "
                        f"({exc}). Run `python manage.py migrate`."
                    ) from exc
                if kind is not ErrorKind.OUTAGE:
                    raise
                pause = self.pause
                self.pause = min(pause * 2, MAX_PAUSE)
                self.on_error()
                if self.forced.is_set():
                    logger.warning("Database error while %s, giving up (stopping now): %s", what, exc)
                    return None
                logger.warning("Database error while %s, retrying in %.1fs: %s", what, pause, exc)
                if once:
                    self.looks_at(self.wake, time.monotonic() + pause)  # a deadline ends it
                    self.wake.wait(pause)
                    self.looks_at(self.wake, 0.0)
                    self.wake.clear()
                    return None
                if self.forced.wait(pause):
                    return None
            else:
                self.pause = FIRST_PAUSE
                return result


def _close(using: str) -> None:
    try:
        connections[using].close()
    except (DatabaseError, InterfaceError):
        pass


def close_broken_connections() -> None:
    """Close this thread's connections that saw errors and fail a liveness check."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and connection.errors_occurred:
            if connection.is_usable():
                connection.errors_occurred = False
            else:
                connection.close()
