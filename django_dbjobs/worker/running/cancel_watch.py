"""CancelWatch: a worker learns which of its jobs were asked to stop, and interrupts them.

One indexed query a second while the worker holds jobs (its RUNNING jobs with a
cancel request, on the running-jobs index), never a query per job. A job not started
yet is flagged and recorded cancelled instead of running (execution.run()); a running
one is interrupted like a timeout (interrupts.cancel()), or only flagged when it is not
interruptible (``current_job().cancel_requested``). After a sweep took this worker's jobs
away (it was frozen or cut off), its running jobs with a concurrency key are interrupted
too: their slots went back to their keys. A job asked to stop that the worker gives back
is recorded cancelled by that write (models/cancelling.py): given_back_cancelled() reports it.
"""

from __future__ import annotations

import logging
import time

from django.db import DatabaseError, InterfaceError

from ... import registry
from ...db.outage import Outage
from ...enqueuing import enqueuer_context
from ...exceptions import JobCancelled, MissingMigrations
from ...models import Job, JobStatus
from ...observability import log_fields
from ...registry.registered import RegisteredJob
from ...signals import job_failed, send
from ..claiming.held import HeldJobs
from ..identity import Identity
from ..leases.lease import Lease
from . import execution, interrupts

logger = logging.getLogger("django_dbjobs")

#: Seconds between a worker's looks for cancel requests: a running job stops within about this.
CHECK_INTERVAL = 1.0


class CancelWatch:
    def __init__(self, identity: Identity, held: HeldJobs, outage: Outage, lease: Lease):
        self.identity = identity
        self.held = held
        self.outage = outage
        self.lease = lease
        self._next = 0.0
        self._interrupted: set[str] = set()
        self._epoch = lease.epoch

    def check_if_due(self) -> None:
        """Look for cancel requests when a check is due and jobs are held; act on them."""
        now = time.monotonic()
        if now < self._next or not len(self.held):
            return
        self._next = now + CHECK_INTERVAL
        if self.lease.epoch != self._epoch:
            self._stop_lost_keyed_jobs()
        worker = self.identity
        asked = Job.objects.using(worker.using).owned_by(worker.id).filter(cancel_requested_at__isnull=False)
        try:
            requested = self.outage.call(
                lambda: set(asked.values_list("pk", flat=True)), "checking for cancel requests", once=True
            )
        except MissingMigrations:
            raise
        except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
            logger.exception("Unexpected error while checking for cancel requests id=%s", worker.id)
            return
        self._interrupted &= requested or set()
        if not requested:
            return
        for job in self.held.all():
            if job.pk not in requested or job.pk in self._interrupted:
                continue
            if not job.cancel_requested:
                job.request_cancel()
                logger.info(
                    "Job cancel requested id=%s name=%s", job.pk, job.name, extra=log_fields.for_job(job)
                )
            if interrupts.cancel(job.pk):
                self._interrupted.add(job.pk)
                logger.info(
                    "Job interrupted: cancelled id=%s name=%s",
                    job.pk,
                    job.name,
                    extra=log_fields.for_job(job),
                )

    def _stop_lost_keyed_jobs(self) -> None:
        """After a sweep judged this worker dead (frozen, cut off): interrupt its running jobs
        with a concurrency key that it no longer owns.

        Their slots were given back by the sweep and may be taken by other jobs of their
        keys: running on would put one job too many in the key. Their outcomes would be
        dropped by the fence anyway.
        """
        worker = self.identity
        keyed = [job for job in interrupts.running() if job.concurrency_key is not None]
        mine = Job.objects.using(worker.using).owned_by(worker.id).filter(pk__in=[job.pk for job in keyed])
        try:
            owned = set(mine.values_list("pk", "pickups")) if keyed else set()
        except (DatabaseError, InterfaceError):
            return  # tried again on the next check
        self._epoch = self.lease.epoch
        for job in keyed:  # by pickup: this worker may have claimed the job again since
            if (job.pk, job.pickups) not in owned and interrupts.stop_lost(job):
                logger.warning(
                    "Job interrupted: this worker lost it, and its concurrency slot id=%s name=%s",
                    job.pk,
                    job.name,
                    extra=log_fields.for_job(job),
                )

    def due_in(self) -> float:
        return max(self._next - time.monotonic(), 0.0)


def given_back_cancelled(job: Job) -> None:
    """Log and signal a job recorded cancelled as this worker gave it back, as if it had run."""
    error = job.errors[-1]
    level = RegisteredJob.dead_letter_log_level(registry.lookup(job.name))
    logger.log(
        level,
        "Job cancelled id=%s name=%s attempts=%s error=%s",
        job.pk,
        job.name,
        job.attempts,
        error["summary"],
        extra=log_fields.for_job(job),
    )
    with enqueuer_context.restoring_safely(job.context):
        execution.finished(
            job, JobStatus.FAILED, JobCancelled(error["summary"].removeprefix("JobCancelled: "))
        )
        send(job_failed, job=job, error=error)


def report_cancelled(using: str, ids) -> None:
    """given_back_cancelled() for the jobs `ids`, read again whole (a give-back that only knew
    their ids: jobs this worker owned and did not hold)."""
    for job in Job.objects.using(using).filter(pk__in=list(ids)).order_by("pk"):
        given_back_cancelled(job)
