"""Heartbeat: a thread that keeps a worker's row fresh on its own connection.

A long job or a busy claim connection never delays it. If the row is gone (a sweep
judged this worker dead while it was frozen or cut off), it is written again and the
worker is told (`on_lost`), so it drops the prefetched jobs that were taken away; the
running ones are fenced, so their late outcomes are dropped.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError, connections
from django.db.models.functions import Now

from ...models import WorkerProcess
from ..identity import Identity

logger = logging.getLogger("django_dbjobs")


class Heartbeat(threading.Thread):
    def __init__(
        self,
        worker_id: str,
        interval: float,
        register: Callable[[], None],
        using: str,
        on_error: Callable[[], None] = lambda: None,
        on_lost: Callable[[], None] = lambda: None,
    ):
        super().__init__(name="dbjobs-heartbeat", daemon=True)
        self.on_error = on_error
        self.on_lost = on_lost
        self.worker_id = worker_id
        self.interval = interval
        self.register = register
        self.using = using
        self._stop_event = threading.Event()
        #: time.monotonic() when the last beat the database took was sent: what the beat
        #: proves is the worker alive then, not when the answer was read (a process
        #: frozen in between would otherwise thaw believing itself fresh: lease.py).
        self.last_beat = time.monotonic()

    def run(self) -> None:
        try:
            while not self._stop_event.wait(self.interval):
                self.beat()
        finally:
            connections.close_all()

    def beat(self) -> bool:
        """Refresh the worker row by the database clock; return False on a database error."""
        sent = time.monotonic()
        try:
            rows = WorkerProcess.objects.using(self.using).filter(pk=self.worker_id)
            if not rows.update(heartbeat_at=Now()):
                logger.warning(
                    "Worker row was removed (presumed dead); registering again id=%s", self.worker_id
                )
                self.register()
                self.on_lost()
            self.last_beat = sent
            return True
        except (DatabaseError, InterfaceError) as exc:
            logger.warning("Heartbeat failed id=%s: %s", self.worker_id, exc)
            connections[self.using].close()
            self.on_error()
            return False

    def stop(self) -> None:
        self._stop_event.set()


def register(identity: Identity, concurrency: int) -> None:
    """Write the worker's row: its heartbeat, and what it serves (dbjobs_status, the admin)."""
    WorkerProcess.objects.using(identity.using).create(
        id=identity.id,
        hostname=socket.gethostname()[:255],
        pid=os.getpid(),
        queues=list(identity.queues),
        concurrency=concurrency,
    )
