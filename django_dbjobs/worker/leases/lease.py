"""Lease: whether a worker still owns what it holds, after a freeze or an outage."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import DatabaseError, InterfaceError

from ...conf import settings
from ...db.outage import Outage
from ...models import Job
from ...observability import log_fields
from ..identity import Identity

if TYPE_CHECKING:
    from ..running.job_threads import JobThreads
    from .heartbeat import Heartbeat

logger = logging.getLogger("django_dbjobs")


class Lease:
    """A worker judged dead by a sweep (frozen, cut off) has lost the jobs it held.

    Its running jobs are fenced (their outcomes are dropped); the jobs it prefetched
    must not be started at all, or they would run twice. While heartbeats get through
    nothing here costs anything.
    """

    def __init__(self, identity: Identity, wake: threading.Event):
        self.identity = identity
        self.wake = wake
        self.heartbeat: Heartbeat | None = None
        #: How many times the worker row was found gone. Each job is stamped with the
        #: epoch it was queued in (JobThreads.submit); an older stamp means "check first".
        self.epoch = 0
        self._handled = 0
        self._lock = threading.Lock()

    def lost(self) -> None:
        """The heartbeat found the worker row gone (called on its thread)."""
        with self._lock:
            self.epoch += 1
        self.wake.set()

    def _stale(self) -> bool:
        beat = self.heartbeat.last_beat if self.heartbeat is not None else time.monotonic()
        return time.monotonic() - beat >= settings.HEARTBEAT_TIMEOUT / 2

    def may_start(self, job: Job) -> bool:
        """False for a prefetched job a sweep took back (called by a job thread before it starts it)."""
        if getattr(job, "_lease_epoch", self.epoch) == self.epoch and not self._stale():
            return True
        worker = self.identity
        try:
            owned = Job.objects.using(worker.using).still_owned(worker.id, [job])
        except (DatabaseError, InterfaceError) as exc:
            logger.warning(
                "Could not check a prefetched job after an unresponsive spell; running it (at least "
                "once; its outcome is fenced) id=%s: %s",
                job.pk,
                exc,
                extra=log_fields.for_job(job),
            )
            return True
        if job.pk in owned:
            return True
        logger.warning(
            "Prefetched job dropped: a sweep gave it back while this worker was unresponsive id=%s",
            job.pk,
            extra=log_fields.for_job(job),
        )
        return False

    def drop_lost_jobs(self, threads: JobThreads, outage: Outage, on_dropped: Callable[[Job], None]) -> None:
        """After the row was found gone: drop the unstarted jobs this worker no longer owns.

        Jobs claimed since it woke are still its own; each dropped job goes to
        `on_dropped` (no longer held). Until this is done, job threads check each job
        they start (may_start()).
        """
        epoch = self.epoch
        if epoch == self._handled:
            return
        worker = self.identity
        unstarted = threads.take_unstarted()
        # If the database cannot tell, the jobs go back unchecked (with their old epoch,
        # so may_start() checks each) and this is tried again on the next turn.
        try:
            owned = outage.call(
                lambda: Job.objects.using(worker.using).still_owned(worker.id, unstarted),
                "checking jobs",
                once=True,
            )
        except Exception:
            threads.submit(unstarted, None)
            raise
        if owned is None:
            threads.submit(unstarted, None)
            return
        lost = [job for job in unstarted if job.pk not in owned]
        for job in lost:
            on_dropped(job)
        threads.submit([job for job in unstarted if job.pk in owned], epoch)
        self._handled = epoch
        if lost:
            logger.warning(
                "Prefetched jobs dropped: a sweep gave them back while this worker was unresponsive "
                "count=%s id=%s",
                len(lost),
                worker.id,
                extra=log_fields.for_count(len(lost)),
            )
