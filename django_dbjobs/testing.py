"""Helpers for your own tests: run jobs in the test's thread, capture what was enqueued, check
that jobs are safe to run twice.

``run_jobs()`` works inside ``TestCase`` on every database: it claims and runs due jobs
one at a time in the calling thread, on the caller's connection, inside the test's
transaction. It never starts a thread, never waits for ``on_commit`` (which a
``TestCase`` never reaches) and never closes a connection, unlike ``run_jobs`` the
worker, which is a process of its own.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from django.db import router, transaction
from django.db.models.functions import Now

from .db.outage import Outage
from .flow import admission
from .idempotency import Checker, IdempotencyReport
from .models import Blocked, Job, JobStatus
from .observability import consuming
from .signals import job_enqueued
from .worker.running import execution

__all__ = [
    "CapturedJobs",
    "IdempotencyReport",
    "capture_jobs",
    "check_idempotency",
    "idempotency_checked",
    "run_jobs",
]

_T = TypeVar("_T")

#: The worker id jobs run by run_jobs() are recorded under (Job.worker_ids).
TEST_WORKER = "dbjobs-testing"

#: The checker run_jobs() hands each job to, inside idempotency_checked().
_checking: contextvars.ContextVar[Checker | None] = contextvars.ContextVar("dbjobs_checking", default=None)


def run_jobs(
    queues: list[str] | None = None,
    *,
    include_scheduled: bool = False,
    max_jobs: int = 1000,
    using: str | None = None,
    raise_errors: bool = False,
) -> list[Job]:
    """Run due jobs now, in this thread and on this connection, until none is due; return them.

    Jobs that the jobs enqueue run too, when due. A failed attempt is retried by the
    usual rules, so its retry is due only after its backoff; with
    `include_scheduled`, every READY job is due at once (jobs enqueued with a delay,
    and retries, until their attempts are spent). Raises RuntimeError after
    `max_jobs` runs, so a job that enqueues itself cannot loop forever.
    A job that hands itself back (raises ResumeLater) runs again once due, uncharged, as on
    a worker. Returns the jobs run, one entry per run, as each run left them.

    A failure is recorded on its job, as a worker records it, and not printed: the
    worker's log lines reach only handlers the project configured. With
    `raise_errors`, the first failed attempt's exception is raised once its outcome
    is stored.

    Inside ``idempotency_checked()`` each job is checked first (see check_idempotency()),
    and an AssertionError names the jobs not safe to run twice once none is due.
    """
    checker = _checking.get()
    if checker is None:
        return _run_jobs(queues, include_scheduled, max_jobs, using, raise_errors)
    earlier = len(checker.report.findings)
    ran = _run_jobs(queues, include_scheduled, max_jobs, using, raise_errors, checker)
    checker.report.jobs += ran
    IdempotencyReport(findings=checker.report.findings[earlier:]).assert_safe()
    return ran


def check_idempotency(
    queues: list[str] | None = None,
    *,
    ignore: Iterable[str] = (),
    include_scheduled: bool = False,
    max_jobs: int = 1000,
    using: str | None = None,
    raise_errors: bool = False,
    fail: bool = True,
) -> IdempotencyReport:
    """Run due jobs as run_jobs() does, checking that each is safe to run twice; return the report.

    Each job runs as if its worker died after its writes, before its outcome was stored
    (recovered as the sweep would, and run again), and, once it succeeded, a second time,
    as the same job queued again; both extra runs are rolled back, and the test goes on from a single
    run. Raises AssertionError naming each job whose extra run added, removed or changed
    rows, enqueued jobs or sent emails, or raised; with ``fail=False`` the report says it
    (``report.findings``). `ignore` leaves models or fields out of the comparison:
    ``["shop.Order.synced_at", "shop.AuditLog"]``; fields with ``auto_now`` or
    ``auto_now_add`` always are. Reads every table whole: for tests.
    """
    checker = Checker(ignore)
    checker.report.jobs = _run_jobs(queues, include_scheduled, max_jobs, using, raise_errors, checker)
    if fail:
        checker.report.assert_safe()
    return checker.report


@contextlib.contextmanager
def idempotency_checked(ignore: Iterable[str] = ()) -> Iterator[IdempotencyReport]:
    """Make every run_jobs() call in the block check the jobs it runs, as check_idempotency() does.

    Each call raises AssertionError once none is due if a job it ran is not safe to run
    twice. Yields the report of every call in the block. Also a decorator; the pytest
    marker ``@pytest.mark.dbjobs_idempotent`` wraps a test in it.
    """
    checker = Checker(ignore)
    token = _checking.set(checker)
    try:
        yield checker.report
    finally:
        _checking.reset(token)


def _run_jobs(
    queues: list[str] | None,
    include_scheduled: bool,
    max_jobs: int,
    using: str | None,
    raise_errors: bool,
    checker: Checker | None = None,
) -> list[Job]:
    using = using or router.db_for_write(Job)
    consuming.install()  # traced as a worker's runs are, if the project set up OpenTelemetry
    failures: list[BaseException] = []
    token = execution.failure_listener.set(lambda job, failure: failures.append(failure))
    try:
        with _quiet_unless_configured():
            return _run_due(
                queues, include_scheduled, max_jobs, using, failures if raise_errors else None, checker
            )
    finally:
        execution.failure_listener.reset(token)


def _run_due(
    queues: list[str] | None,
    include_scheduled: bool,
    max_jobs: int,
    using: str,
    failures: list[BaseException] | None,
    checker: Checker | None,
) -> list[Job]:
    jobs = Job.objects.using(using)
    ran: list[Job] = []
    while True:
        if include_scheduled:
            jobs.for_queues(queues).filter(status=JobStatus.READY, run_at__gt=Now()).update(run_at=Now())
        if len(ran) >= max_jobs:
            if jobs.due().for_queues(queues).exists():
                raise RuntimeError(
                    f"run_jobs() ran {max_jobs} jobs and more are due; does a job enqueue itself, "
                    "or hand itself back (raise ResumeLater) every time it runs?"
                )
            return ran
        with transaction.atomic(using=using):
            # Jobs with a concurrency key wait for a slot, as in a worker serving these queues;
            # rate limits do not apply here: every job of a rate-limited queue is claimable.
            admission.admit(using, scope=admission.Scope(tuple(queues) if queues else None))
            jobs.for_queues(queues).filter(status=JobStatus.READY, blocked=Blocked.RATE).update(blocked="")
            claimed = jobs.claim(TEST_WORKER, 1, queues=queues)
        if not claimed:
            return ran
        (job,) = claimed
        # The job's body runs in a savepoint: a database error it raises leaves the test's
        # transaction usable. Errors storing the outcome are raised, never waited out.
        if checker is None:
            status = _run_one(job)
        else:
            status = checker.run(job, TEST_WORKER, _run_one)
        if status is None:
            raise RuntimeError(f"run_jobs() could not store the outcome of job {job.pk} ({job.name}).")
        job.refresh_from_db()
        ran.append(job)
        if failures:
            raise failures[0]


def _run_one(job: Job) -> str | None:
    """Run a claimed job as run_jobs() does; return the status stored (None: not stored)."""
    return execution.run(job, TEST_WORKER, outage=_Raising(job._state.db or "default"), savepoint=True)


@contextlib.contextmanager
def _quiet_unless_configured() -> Iterator[None]:
    """Keep the worker's log lines from Python's last-resort handler (stderr) while jobs run.

    A worker's failure lines carry tracebacks; with no handler configured for them,
    Python would print each one into the test run's output. Where the project (or
    pytest's log capture) configured a handler, the lines go there as usual.
    """
    logger = logging.getLogger("django_dbjobs")
    if logger.hasHandlers():
        yield
        return
    previous, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = previous


class _Raising(Outage):
    """No outage handling in a test: every database error is raised as it is, no connection closed."""

    def call(self, action: Callable[[], _T], what: str, once: bool = False) -> _T:
        return action()


class CapturedJobs(list[Job]):
    """The jobs enqueued inside ``capture_jobs()``, in order (a list of Job)."""

    @property
    def names(self) -> list[str]:
        """The registered names of the captured jobs, in order."""
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

    def receiver(sender: Any, job: Job, **kwargs: Any) -> None:
        captured.append(job)

    job_enqueued.connect(receiver, weak=False)
    try:
        yield captured
    finally:
        job_enqueued.disconnect(receiver)
