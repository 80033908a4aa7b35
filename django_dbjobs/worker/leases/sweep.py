"""The orphan sweep: recover jobs whose worker stopped heartbeating.

Every worker sweeps on DBJOBS_SWEEP_INTERVAL. Many sweepers at once are safe: each
recovery is one UPDATE by primary key, fenced on the lost worker still holding the
job, so exactly one sweeper wins each job. Only a job that was running alone when its
worker died is charged the attempt; the others go back uncharged to run alone (see
models.Isolation). Rows are handled one by one by key
because a range UPDATE racing heartbeat UPDATEs deadlocks on MySQL/MariaDB.
"""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass

from django.db import DatabaseError, InterfaceError, transaction
from django.db.models.functions import Now

from ... import db, registry
from ...conf import settings
from ...db.outage import close_broken_connections
from ...enqueuing import enqueuer_context
from ...exceptions import JobCancelled, WorkerLost
from ...models import Isolation, Job, JobStatus, WorkerProcess
from ...models.settling import CANCELLED
from ...observability import log_fields, run_hooks
from ...registry.registered import RegisteredJob
from ...signals import job_failed, send

logger = logging.getLogger("django_dbjobs")


@dataclass
class SweepResult:
    given_back: int = 0  # uncharged: may never have started (see models.Isolation)
    requeued: int = 0  # charged: it was running alone when its worker died
    failed: int = 0
    workers_removed: int = 0


class Sweeper:
    """Sweep every DBJOBS_SWEEP_INTERVAL, for one worker.

    The first sweep, and the first after a database error, waits until the database
    has worked for a heartbeat timeout, so that live workers have beaten again before
    they are judged (after an outage every heartbeat looks stale). A worker restarted
    after a crash loses nothing by it: the dead worker's heartbeat turns stale no
    sooner than a heartbeat timeout after its death anyway.
    """

    def __init__(self, worker_id: str, using: str):
        self.worker_id = worker_id
        self.using = using
        self._next = 0.0
        self._healthy_since = time.monotonic()
        self._swept = False

    def database_error(self) -> None:
        self._healthy_since = time.monotonic()

    def due_in(self) -> float:
        """Seconds until the next sweep may run."""
        now = time.monotonic()
        return max(self._next - now, self._healthy_since + settings.HEARTBEAT_TIMEOUT - now, 0.0)

    def first_sweep_pending(self, orphans_may_exist) -> bool:
        """True until this worker has swept once, if `orphans_may_exist()` says jobs run elsewhere."""
        return not self._swept and orphans_may_exist()

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
        self._swept = True
        if result.given_back or result.requeued or result.failed or result.workers_removed:
            logger.warning(
                "Sweep recovered lost work given_back=%s requeued=%s failed=%s workers_removed=%s",
                result.given_back,
                result.requeued,
                result.failed,
                result.workers_removed,
                extra=log_fields.for_count(result.given_back + result.requeued + result.failed),
            )


def stale_before(timeout: float):
    """The database-clock instant before which a heartbeat is stale."""
    return Now() - datetime.timedelta(seconds=timeout)


def sweep(sweeper: str, timeout: float, using: str = "default") -> SweepResult:
    """Recover running jobs of dead workers and delete the dead workers' rows.

    Stale worker rows go first, each by one DELETE fenced on its heartbeat still being
    stale: a frozen worker that beats again in time keeps its row (and its jobs), and
    one that beats later finds its row gone, so it knows its jobs were taken (lease.py).
    Then the jobs of workers without a row are recovered. Reads only what it needs:
    which workers hold running jobs (from the index of running jobs by worker), which of them
    still have a row, then the jobs of the others.
    """
    result = SweepResult()
    workers = WorkerProcess.objects.using(using)
    stale = workers.filter(heartbeat_at__lt=stale_before(timeout))
    for worker_id in stale.exclude(pk=sweeper).values_list("pk", flat=True):
        removed, _ = stale.filter(pk=worker_id).delete()
        result.workers_removed += bool(removed)
    jobs = Job.objects.using(using)
    # Who holds running jobs, read before who has a row: a worker that claimed a job we
    # saw had registered before, so the second read cannot miss it.
    running = jobs.running().exclude(worker=sweeper).order_by()
    holders = set(running.values_list("worker", flat=True).distinct())
    if not holders:
        return result
    alive = set(workers.filter(pk__in=holders).values_list("pk", flat=True))
    fields = (
        "id",
        "name",
        "queue",  # for its log lines' fields (log_fields.py) and the outcome's listeners (run_hooks.py)
        "worker",
        "attempts",
        "pickups",
        "max_attempts",
        "errors",
        "isolation",
        "worker_ids",
        "context",
        "batch_id",  # a job of a workflow is recovered with its bookkeeping (JobOutcomes._write)
        "has_dependents",
    )
    for lost in sorted(holders - alive):
        for job in jobs.owned_by(lost).only(*fields):
            _recover(job, lost, result)
    return result


def _recover(job: Job, lost: str, result: SweepResult) -> None:
    charged = job.isolation == Isolation.STARTED
    error = worker_lost_error(job, lost)
    using = job._state.db or "default"
    with transaction.atomic(using=using):
        # A job's own open transaction may hold its row (a checkpoint() in the job's
        # transaction.atomic()), and a frozen worker never ends it: skip the row, and
        # recover it on a later sweep, rather than stall this worker's loop behind it.
        if not list(db.lock_or_skip(Job.objects.using(using).filter(pk=job.pk)).values_list("pk")):
            return
        if not job.recover(lost, error):
            return  # another sweeper, or the worker itself, got there first
    if job.status == JobStatus.FAILED:
        result.failed += 1
        _failed(job, lost)
    elif not charged:
        result.given_back += 1
        logger.info(
            "Job given back from a lost worker, uncharged id=%s name=%s worker=%s",
            job.pk,
            job.name,
            lost,
            extra=log_fields.for_job(job),
        )
    else:
        result.requeued += 1
        run_hooks.outcome(job, JobStatus.READY, _worker_lost(error))
        logger.warning(
            "Job recovered from a lost worker it was running alone in id=%s name=%s attempt=%s worker=%s",
            job.pk,
            job.name,
            job.attempts,
            lost,
            extra=log_fields.for_job(job),
        )


def _failed(job: Job, lost: str) -> None:
    """Log and signal a job the sweep dead-lettered: lost on every attempt, or asked to stop."""
    registered = registry.lookup(job.name)
    summary = job.errors[-1]["summary"]
    if job.errors[-1]["exception_class_path"] == CANCELLED:  # models/cancelling.py
        failure: BaseException = JobCancelled(summary.removeprefix("JobCancelled: "))
        what = "Job cancelled: it was asked to stop, and its worker was lost"
    else:
        failure = _worker_lost(job.errors[-1])
        what = "Job failed: its worker was lost on every attempt"
    # One log record per failed job: a Task's is Django's (task_finished, below).
    logger.log(
        RegisteredJob.dead_letter_log_level(registered),
        "%s id=%s name=%s attempts=%s worker=%s",
        what,
        job.pk,
        job.name,
        job.attempts,
        lost,
        extra=log_fields.for_job(job),
    )
    run_hooks.outcome(job, JobStatus.FAILED, failure)
    with enqueuer_context.restoring_safely(job.context):
        send(job_failed, job=job, error=job.errors[-1])
        if registered is not None:  # a Task's task_finished
            registered.finished(job, JobStatus.FAILED, failure)


def _worker_lost(error: dict) -> WorkerLost:
    """The exception of a lost worker's error record, as the outcome's listeners hear it."""
    return WorkerLost(str(error.get("summary", "")).removeprefix("WorkerLost: "))


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


def orphans_may_exist(worker_id: str, using: str) -> bool:
    """True if jobs are RUNNING under a worker whose heartbeat is stale or whose row is gone."""
    live = WorkerProcess.objects.using(using).filter(
        heartbeat_at__gte=stale_before(settings.HEARTBEAT_TIMEOUT)
    )
    try:
        running = Job.objects.using(using).running().exclude(worker=worker_id)
        return running.exclude(worker__in=live.values("pk")).exists()
    except (DatabaseError, InterfaceError):
        return True
