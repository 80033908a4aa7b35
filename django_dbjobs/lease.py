"""Lease: whether a worker still owns what it holds, after a freeze or an outage."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from django.db import DatabaseError, InterfaceError

from .conf import settings
from .models import Job

if TYPE_CHECKING:
    from .heartbeat import Heartbeat
    from .worker import Worker

logger = logging.getLogger("django_dbjobs")


class Lease:
    """A worker judged dead by a sweep (frozen, cut off) has lost the jobs it held.

    Its running jobs are fenced (their outcomes are dropped); the jobs it prefetched
    must not be started at all, or they would run twice. While heartbeats get through
    nothing here costs anything.
    """

    def __init__(self, worker: Worker):
        self.worker = worker
        self.heartbeat: Heartbeat | None = None
        self._lost = threading.Event()

    def lost(self) -> None:
        """The heartbeat found the worker row gone (called on its thread)."""
        self._lost.set()
        self.worker._wake.set()

    @property
    def in_doubt(self) -> bool:
        """True after a lost row, or with no beat for half the heartbeat timeout."""
        beat = self.heartbeat.last_beat if self.heartbeat is not None else time.monotonic()
        return self._lost.is_set() or time.monotonic() - beat >= settings.HEARTBEAT_TIMEOUT / 2

    def may_start(self, job: Job) -> bool:
        """False for a prefetched job a sweep took back (called by a job thread before it starts it)."""
        if not self.in_doubt:
            return True
        worker = self.worker
        try:
            owned = Job.objects.using(worker.using).still_owned(worker.id, [job])
        except (DatabaseError, InterfaceError):
            return True  # cannot tell: run it (at least once); its outcome is fenced anyway
        if job.pk in owned:
            return True
        logger.warning(
            "Prefetched job dropped: a sweep gave it back while this worker was unresponsive id=%s", job.pk
        )
        return False

    def drop_lost_jobs(self) -> None:
        """After the row was found gone: drop the unstarted jobs this worker no longer owns.

        Jobs claimed since it woke are still its own. Until this is done, job threads
        check each job they start (may_start()).
        """
        if not self._lost.is_set():
            return
        worker = self.worker
        unstarted = worker._threads.take_unstarted()
        owned = worker._outage.call(
            lambda: Job.objects.using(worker.using).still_owned(worker.id, unstarted), "checking jobs"
        )
        owned = owned or set()
        lost = [job for job in unstarted if job.pk not in owned]
        for job in lost:
            worker.job_done(job)
        worker._threads.submit([job for job in unstarted if job.pk in owned])
        self._lost.clear()
        if lost:
            logger.warning(
                "Prefetched jobs dropped: a sweep gave them back while this worker was unresponsive "
                "count=%s id=%s",
                len(lost),
                worker.id,
            )
