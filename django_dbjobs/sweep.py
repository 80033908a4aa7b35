"""The orphan sweep: recover jobs whose worker stopped heartbeating.

Every worker sweeps on DBJOBS_SWEEP_INTERVAL. Many sweepers at once are safe: each
recovery is one UPDATE by primary key, fenced on the lost worker still holding the
job, so exactly one sweeper wins each job. Rows are handled one by one by key
because a range UPDATE racing heartbeat UPDATEs deadlocks on MySQL/MariaDB.
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass

from django.db import DatabaseError, InterfaceError
from django.db.models.functions import Now

from .conf import settings
from .execution import close_broken_connections
from .models import Job, JobStatus, WorkerProcess
from .signals import job_failed

logger = logging.getLogger("django_dbjobs")


@dataclass
class SweepResult:
    requeued: int = 0
    failed: int = 0
    workers_removed: int = 0


class Sweeper:
    """Sweep every DBJOBS_SWEEP_INTERVAL (and at once at start), for one worker.

    After a database error it waits until the database has worked for a heartbeat
    timeout, so that live workers have beaten again before they are judged.
    """

    def __init__(self, worker_id: str, using: str):
        self.worker_id = worker_id
        self.using = using
        self._next = 0.0
        self._healthy_since = float("-inf")

    def database_error(self) -> None:
        self._healthy_since = time.monotonic()

    def sweep_if_due(self) -> None:
        now = time.monotonic()
        if now < self._next or now - self._healthy_since < settings.HEARTBEAT_TIMEOUT:
            return
        self._next = now + settings.SWEEP_INTERVAL
        try:
            result = sweep(self.worker_id, settings.HEARTBEAT_TIMEOUT, self.using)
        except (DatabaseError, InterfaceError) as exc:
            logger.warning("Database error while sweeping for lost jobs: %s", exc)
            self.database_error()
            close_broken_connections()
            return
        if result.requeued or result.failed or result.workers_removed:
            logger.warning(
                "Sweep recovered lost work requeued=%s failed=%s workers_removed=%s",
                result.requeued,
                result.failed,
                result.workers_removed,
            )


def stale_before(timeout: float):
    """The database-clock instant before which a heartbeat is stale."""
    return Now() - datetime.timedelta(seconds=timeout)


def sweep(sweeper: str, timeout: float, using: str = "default") -> SweepResult:
    """Recover running jobs of dead workers and delete the dead workers' rows."""
    result = SweepResult()
    # Read the running jobs before the live workers: a worker that claimed a job we
    # read had registered before, so the second read cannot miss it.
    running = list(Job.objects.using(using).running().exclude(worker=sweeper))
    if running:
        live = set(
            WorkerProcess.objects.using(using)
            .filter(heartbeat_at__gte=stale_before(timeout))
            .values_list("pk", flat=True)
        )
        for job in running:
            if job.worker in live:
                continue
            lost = job.worker
            if not job.recover(lost, worker_lost_error(job, lost)):
                continue  # another sweeper, or the worker itself, got there first
            if job.status == JobStatus.FAILED:
                result.failed += 1
                logger.error(
                    "Job failed: its worker was lost on every attempt id=%s name=%s attempts=%s worker=%s",
                    job.pk,
                    job.name,
                    job.attempts,
                    lost,
                )
                job_failed.send(sender=Job, job=job, error=job.errors[-1])
            else:
                result.requeued += 1
                logger.warning(
                    "Job recovered from a lost worker id=%s name=%s attempt=%s worker=%s",
                    job.pk,
                    job.name,
                    job.attempts,
                    lost,
                )
    stale = WorkerProcess.objects.using(using).filter(heartbeat_at__lt=stale_before(timeout))
    for worker_id in stale.exclude(pk=sweeper).values_list("pk", flat=True):
        removed, _ = stale.filter(pk=worker_id).delete()
        result.workers_removed += bool(removed)
    return result


def worker_lost_error(job: Job, worker: str) -> dict:
    summary = f"WorkerLost: worker {worker} stopped heartbeating while running attempt {job.attempts}"
    return {
        "exception_class_path": "django_dbjobs.exceptions.WorkerLost",
        "traceback": "",
        "summary": summary,
        "attempt": job.attempts,
        "worker": worker,
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    }
