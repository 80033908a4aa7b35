"""Riding out database outages: retry with a growing pause instead of crashing."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError

from .execution import close_broken_connections

logger = logging.getLogger("django_dbjobs")

T = TypeVar("T")

#: First and longest pause between tries while the database is unreachable.
FIRST_PAUSE = 0.5
MAX_PAUSE = 30.0


class Outage:
    """The worker's backoff through database errors: 0.5 s doubling to 30 s, reset on success."""

    def __init__(
        self,
        wake: threading.Event,
        on_error: Callable[[], None],
        give_up: Callable[[], bool] = lambda: False,
    ):
        self.wake = wake
        self.on_error = on_error
        self.give_up = give_up  # checked after each error: pause once more and return None
        self.pause = FIRST_PAUSE

    def call(self, action: Callable[[], T], what: str, once: bool = False) -> T | None:
        """Run `action`, retrying with backoff while the database is down.

        With `once`, or once `give_up()` is true (a forced stop), it pauses a single
        time (a wake cuts the pause short) and returns None, so the caller can move on.
        """
        while True:
            try:
                result = action()
            except (DatabaseError, InterfaceError) as exc:
                pause = self.pause
                self.pause = min(pause * 2, MAX_PAUSE)
                logger.warning("Database error while %s, retrying in %.1fs: %s", what, pause, exc)
                self.on_error()
                close_broken_connections()
                if once or self.give_up():
                    self.wake.wait(pause)
                    self.wake.clear()
                    return None
                time.sleep(pause)
            else:
                self.pause = FIRST_PAUSE
                return result
