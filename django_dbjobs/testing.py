"""Helpers for your own tests: run jobs in the test's thread, and capture what was enqueued.

``run_jobs()`` works inside ``TestCase`` on every database: it claims and runs due jobs
one at a time in the calling thread, on the caller's connection, inside the test's
transaction. It never starts a thread, never waits for ``on_commit`` (which a
``TestCase`` never reaches) and never closes a connection, unlike ``run_jobs`` the
worker, which is a process of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import router, transaction
from django.db.models.functions import Now

from . import execution
from .models import Job, JobStatus
from .outage import Outage
from .signals import job_enqueued

__all__ = ["CapturedJobs", "capture_jobs", "run_jobs"]

#: The worker id jobs run by run_jobs() are recorded under (Job.worker_ids).
TEST_WORKER = "dbjobs-testing"


def run_jobs(
    queues: list[str] | None = None,
    *,
    include_scheduled: bool = False,
    max_jobs: int = 1000,
    using: str | None = None,
) -> list[Job]:
    """Run due jobs now, in this thread and on this connection, until none is due; return them.

    Jobs that the jobs enqueue run too, when due. A failed attempt is retried by the
    usual rules, so its retry is due only after its backoff; with
    `include_scheduled`, every READY job is due at once (jobs enqueued with a delay,
    and retries, until their attempts are spent). Raises RuntimeError after
    `max_jobs` runs, so a job that enqueues itself cannot loop forever.
    Returns the jobs run, one entry per attempt, as each attempt left them.
    """
    using = using or router.db_for_write(Job)
    jobs = Job.objects.using(using)
    ran: list[Job] = []
    while True:
        if include_scheduled:
            jobs.for_queues(queues).filter(status=JobStatus.READY, run_at__gt=Now()).update(run_at=Now())
        if len(ran) >= max_jobs:
            if jobs.due().for_queues(queues).exists():
                raise RuntimeError(
                    f"run_jobs() ran {max_jobs} jobs and more are due; does a job enqueue itself?"
                )
            return ran
        with transaction.atomic(using=using):
            claimed = jobs.claim(TEST_WORKER, 1, queues=queues)
        if not claimed:
            return ran
        (job,) = claimed
        # The job's body runs in a savepoint: a database error it raises leaves the test's
        # transaction usable. Errors storing the outcome are raised, never waited out.
        status = execution.run(job, TEST_WORKER, outage=_Raising(using), savepoint=True)
        if status is None:
            raise RuntimeError(f"run_jobs() could not store the outcome of job {job.pk} ({job.name}).")
        job.refresh_from_db()
        ran.append(job)


class _Raising(Outage):
    """No outage handling in a test: every database error is raised as it is, no connection closed."""

    def call(self, action, what, once=False):
        return action()


class CapturedJobs(list):
    """The jobs enqueued inside ``capture_jobs()``, in order (a list of Job)."""

    @property
    def names(self) -> list[str]:
        return [job.name for job in self]

    def named(self, name: str) -> list[Job]:
        """The captured jobs of one registered name (``"shop.jobs.send_receipt"``)."""
        return [job for job in self if job.name == name]


@contextlib.contextmanager
def capture_jobs() -> Iterator[CapturedJobs]:
    """Collect every job enqueued in the block (enqueue, enqueue_many, bulk_enqueue, tasks).

    Jobs are captured when written, before any commit: a rollback does not remove them
    from the list.
    """
    captured = CapturedJobs()

    def receiver(sender, job, **kwargs):
        captured.append(job)

    job_enqueued.connect(receiver, weak=False)
    try:
        yield captured
    finally:
        job_enqueued.disconnect(receiver)
