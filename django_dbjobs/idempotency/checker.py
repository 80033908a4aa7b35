"""Checker: run a claimed job as if its worker died, once for real, then twice; note what differs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from django.core import mail
from django.db import IntegrityError, transaction

from .. import registry
from ..db.outage import Outage
from ..flow import admission
from ..models import Blocked, Job, JobStatus
from ..models.failed_job import retry_changes
from ..worker.leases.sweep import worker_lost_error
from ..worker.running import execution
from .differences import new_emails, new_jobs, row_changes
from .report import RUN_AFTER_DEATH, RUN_TWICE, Finding, IdempotencyReport
from .snapshots import Ignored, Snapshot

_T = TypeVar("_T")

#: Runs a claimed job as testing.run_jobs() does and returns the status stored.
Run = Callable[[Job], "str | None"]
#: Runs a claimed job; returns the status it stored (or would have) and its error's summary.
Noted = Callable[[Job], "tuple[str | None, str | None]"]

#: How execution.py names the writes of an outcome (its _write() calls), as db/outage.py hears them.
STORING_THE_OUTCOME = "storing the outcome"
#: ... and of a job handing itself back (ResumeLater): no outcome, but its run's end all the same.
HANDING_BACK = "handing back"


class Checker:
    """Checks each job it is handed (run_jobs(), idempotency_checked()), collecting a report."""

    def __init__(self, ignore: Iterable[str] = ()):
        self.ignored = Ignored.parse(ignore)  # a bad name is refused before any job runs
        self.report = IdempotencyReport()

    def run(self, job: Job, worker: str, run: Run) -> str | None:
        """Check `job` (claimed by `worker`), then run it once for real with `run`; return its status.

        First, in a transaction rolled back after, the job runs and its worker "dies" before its
        outcome is stored: the job is recovered as the sweep would and runs again. Then it
        runs for real, and the test goes on from there. Then, rolled back again, it runs a
        second time, as the same job queued again would.
        """
        if registry.lookup(job.name) is None:  # handed back for a worker that knows it: never run
            self.report.unchecked.append((job, "no job of this name is registered"))
            return run(job)
        died = self._after_a_death(job, worker, run)
        status = run(job)
        if status == JobStatus.READY:  # ResumeLater: to be run again, by a later run_jobs()
            self.report.unchecked.append((job, "it handed itself back (ResumeLater)"))
            return status
        if status != JobStatus.SUCCESSFUL:
            self.report.unchecked.append((job, f"its run did not succeed ({status})"))
            return status
        self._note(job, died, RUN_AFTER_DEATH)
        self._note(job, self._twice(job, worker, run), RUN_TWICE)
        return status

    def _note(self, job: Job, result: Finding | str | None, how: str) -> None:
        """Keep a finding; a reason the job could not be run again says it went unchecked."""
        if isinstance(result, Finding):
            self.report.findings.append(result)
        elif result is not None:
            self.report.unchecked.append((job, f"not {how}: {result}"))

    def _after_a_death(self, job: Job, worker: str, run: Run) -> Finding | str | None:
        """Run a copy of claimed `job` with its outcome lost, recover it, run it again; roll back."""
        using = job._state.db or "default"
        with _rolled_back(using):
            status, _ = _run_dying(Job.objects.using(using).get(pk=job.pk), worker)
            if status == JobStatus.READY:
                return "it handed itself back (ResumeLater) before the end of its work"
            if status != JobStatus.SUCCESSFUL:
                return f"its first run did not succeed ({status})"
            first = Snapshot.read(using, self.ignored)
            lost = Job.objects.using(using).get(pk=job.pk)
            if not lost.recover(worker, worker_lost_error(lost, worker)):
                raise RuntimeError(
                    f"The idempotency checker could not recover job {job.pk} as a sweep would."
                )
            if lost.status != JobStatus.READY:  # charged, its attempts spent: never runs again
                return None
            # Died before any checkpoint of this run was stored: the run after it starts
            # where this one did, and redoes all of its work (a resumable() walk too).
            Job.objects.using(using).filter(pk=job.pk).update(checkpoint_state=job.checkpoint_state)
            # Its outcome is not stored this time either: the two runs' writes are compared
            # with one run's, without what storing an outcome sets off (signals, callbacks).
            return self._again(
                _claimed(lost, worker), lambda again: _run_dying(again, worker), first, RUN_AFTER_DEATH
            )

    def _twice(self, job: Job, worker: str, run: Run) -> Finding | str | None:
        """Run `job`, which succeeded, again, as the same job queued again (a retry); roll back."""
        using = job._state.db or "default"
        try:
            with _rolled_back(using):
                first = Snapshot.read(using, self.ignored)
                # Outside its batch or its dependents: their bookkeeping counted its outcome once.
                changes = {**retry_changes(), "batch": None, "has_dependents": False}
                Job.objects.using(using).filter(pk=job.pk).update(**changes)
                return self._again(
                    _claimed(job, worker), lambda again: _run_noting(again, run), first, RUN_TWICE
                )
        except IntegrityError:  # its unique key is held anew (a job_finished receiver enqueued one)
            return "another active job holds its unique key"

    def _again(self, job: Job | None, run: Noted, first: Snapshot, how: str) -> Finding | None:
        """Run `job` again; what it changed since `first` (or its failure) as a finding."""
        if job is None:
            raise RuntimeError("The idempotency checker could not claim a job again to run it a second time.")
        status, error = run(job)
        second = Snapshot.read(job._state.db or "default", self.ignored)
        if status == JobStatus.SUCCESSFUL:
            error = None
        finding = Finding(
            job,
            how,
            rows=tuple(row_changes(first, second)),
            enqueued=new_jobs(first, second),
            emails=new_emails(first, second),
            error=error,
        )
        return finding if (finding.rows or finding.enqueued or finding.emails or error) else None


@contextlib.contextmanager
def _rolled_back(using: str) -> Iterator[None]:
    """A transaction (a savepoint inside one) rolled back at the end, the test's emails restored."""
    outbox = getattr(mail, "outbox", None)
    sent = list(outbox) if outbox is not None else []
    try:
        with transaction.atomic(using=using):
            yield
            transaction.set_rollback(True, using=using)
    finally:
        if outbox is not None:
            outbox[:] = sent


def _run_noting(job: Job, run: Run) -> tuple[str | None, str | None]:
    """Run `job` with `run`; return the status stored and the error it failed with, if it did."""
    failures: list[BaseException] = []
    token = execution.failure_listener.set(lambda failed, failure: failures.append(failure))
    try:
        status = run(job)
    finally:
        execution.failure_listener.reset(token)
    return status, (f"{type(failures[0]).__name__}: {failures[0]}" if failures else f"(status {status})")


def _run_dying(job: Job, worker: str) -> tuple[str | None, str | None]:
    """Run claimed `job` as a worker that dies before storing its outcome; return the status and
    error the outcome would have stored."""
    dying = _DiesBeforeOutcome(job)
    with contextlib.suppress(_WorkerDied):
        execution.run(job, worker, outage=dying, savepoint=True)
    if dying.status is None:
        raise RuntimeError(f"The idempotency checker could not stop job {job.pk} before its outcome.")
    return dying.status, job.last_error or None


def _claimed(job: Job, worker: str) -> Job | None:
    """Claim `job`, READY again, for `worker` (admitted first if it has a concurrency key)."""
    using = job._state.db or "default"
    again = Job.objects.using(using).filter(pk=job.pk)
    with transaction.atomic(using=using):
        admission.admit(using, scope=admission.Scope())
        again.filter(blocked=Blocked.RATE).update(blocked=Blocked.NONE)
        claimed = again.claim(worker, 1)
    return claimed[0] if claimed else None


class _WorkerDied(BaseException):
    """Raised in place of storing an outcome: the worker is gone (execution.run() lets it through)."""


class _DiesBeforeOutcome(Outage):
    """A worker that dies once the job's body is done: its outcome is never stored.

    The outcome is written in a savepoint and rolled back at once, only to learn which
    status it would have stored.
    """

    def __init__(self, job: Job):
        super().__init__(job._state.db or "default")
        self.pk = job.pk
        #: The status the outcome would have stored (None: no outcome was stored).
        self.status: str | None = None

    def call(self, action: Callable[[], _T], what: str, once: bool = False) -> _T:
        if not what.startswith((STORING_THE_OUTCOME, HANDING_BACK)):
            return action()
        with transaction.atomic(using=self.using):
            action()
            self.status = Job.objects.using(self.using).values_list("status", flat=True).get(pk=self.pk)
            transaction.set_rollback(True, using=self.using)
        raise _WorkerDied
