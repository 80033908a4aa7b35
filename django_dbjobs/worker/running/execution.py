"""Run one claimed job and record its outcome, fenced on the worker owning it."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from ... import db, registry
from ...conf import settings
from ...context import running
from ...db.outage import Outage
from ...enqueuing import enqueuer_context, validation
from ...exceptions import JobCancelled, MissingMigrations, ResumeLater, UnknownJob
from ...models import Isolation, Job, JobStatus
from ...models.settling import CANCELLED
from ...observability import log_fields, run_hooks
from ...operations import unknown_jobs
from ...registry.registered import RegisteredJob
from ...signals import job_failed, job_finished, job_started, send
from . import async_jobs, deadlines, interrupts
from .error_records import error_record, unstorable_error, without_worker_frames
from .retry import RetryPolicy

logger = logging.getLogger("django_dbjobs")

__all__ = ["run", "store_success", "finished", "error_record"]

#: Longest wait before a job this worker does not know is offered again.
UNKNOWN_JOB_MAX_DELAY = 60.0


def run(
    job: Job,
    worker: str,
    on_success: Callable[[Job, Any], None] | None = None,
    outage: Outage | None = None,
    savepoint: bool = False,
) -> str | None:
    """Run `job` (claimed by `worker`) and store the outcome.

    Return the status stored, or None if the lease was lost and the outcome dropped.
    Whatever the job does is recorded as its outcome; this raises only if the
    database refuses every record of it. With
    `on_success`, a success is handed to it (the worker stores successes in
    batches) instead of being written here; a job running alone (Isolation) has
    its start written first and its outcome stored at once. `outage` rides out
    database outages while storing (default: a fresh one). With `savepoint` (inside a
    caller's transaction: testing.run_jobs()) the job's body runs in a savepoint, so a
    database error it raises leaves the transaction usable for storing its failure.
    """
    outage = outage or Outage(job._state.db)
    if job.cancel_requested:  # asked to stop before it started: it never runs, and is not charged
        cancelled = JobCancelled("the job was cancelled before it started")
        error = error_record(cancelled, job, worker)
        return _dead_letter(job, worker, error, outage, cancelled, unstarted=True)
    try:
        registered = registry.get(job.name)
    except UnknownJob as exc:
        return _unknown(job, worker, exc, outage)
    # A copy of the thread's context: the language, timezone or context variables the job
    # sets (translation.activate(), ...) end with it, never leaking into the next job.
    context = contextvars.copy_context()
    return context.run(_observed, job, worker, registered, on_success, outage, savepoint)


def _observed(job, worker, registered, on_success, outage, savepoint) -> str | None:
    # The run hooks (observability/run_hooks.py: a trace span, metrics) wrap the run and the
    # storing of its outcome, in the job's context, so the job's own spans are children.
    with run_hooks.wrapping(job):
        if not (job.context or settings.CONTEXT_RESTORE):  # the common case: nothing to restore
            return _run(job, worker, registered, on_success, outage, None, savepoint)
        with enqueuer_context.restoring_safely(job.context) as restored:
            return _run(job, worker, registered, on_success, outage, restored, savepoint)


def _run(
    job, worker, registered, on_success, outage, restored: BaseException | None, savepoint: bool = False
) -> str | None:
    alone = job.isolation != Isolation.NONE
    if alone and not _write(outage, job, lambda: job.mark_started_alone(worker), "recording the start"):
        _dropped(job, "RUNNING")
        return None
    failure: BaseException | None = restored
    timeout = registered.options.timeout or settings.DEFAULT_TIMEOUT
    # Armed with or without a deadline: a cancel request interrupts it like a timeout.
    armed = interrupts.Armed.for_job(job, timeout, registered.is_async, registered.options.interruptible)
    returned = False
    if failure is None:
        with running(job):
            try:
                send(job_started, job=job)
                if logger.isEnabledFor(logging.DEBUG):  # the hot path: no fields built for nothing
                    logger.debug(
                        "Job started id=%s name=%s attempt=%s",
                        job.pk,
                        job.name,
                        job.attempts,
                        extra=log_fields.for_job(job),
                    )
                deadlines.arm(armed)
                try:
                    # Two plain calls, not a nullcontext(): its Python __exit__ would be one more
                    # place for a timeout interruption to land after the job returned.
                    if savepoint:
                        result = _in_savepoint(registered, job)
                    else:
                        result = async_jobs.call(registered, job)
                    returned = True
                finally:
                    interrupts.disarm(armed)
            except BaseException as exc:  # noqa: B036 - SystemExit from a job is its failure
                failure = exc
        if armed.interrupted_at is not None:
            # Again: the one interruption may have landed on the way into the first disarm(),
            # and has been delivered now, so this call cannot be interrupted. (Never sent,
            # it cannot land: the first disarm() took the run out of reach.)
            interrupts.disarm(armed)
            failure = interrupts.outcome(armed, failure, returned)
    if failure is None:
        try:
            result = validation.return_value(result, db.rejects_nul(job._state.db))
            validation.return_value_size(result)
        except Exception as exc:  # noqa: BLE001 - not JSON data, too large, or too deep to check
            return _unstorable(job, worker, without_worker_frames(exc), outage, by_database=False)
        # A keyed job's success is stored at once: its slot is free only once it is.
        if on_success is not None and not alone and job.concurrency_key is None:
            on_success(job, result)
            return JobStatus.SUCCESSFUL
        return store_success(job, worker, result, outage)
    if isinstance(failure, ResumeLater):
        return _handed_back(job, worker, failure.delay, outage)
    return record_failure(job, worker, without_worker_frames(failure), registered, outage)


def _in_savepoint(registered, job: Job) -> Any:
    """Call the job in a savepoint (testing.run_jobs()); a failure rolls back its writes.

    But not a checkpoint it stored outside transactions of its own: in a worker that one
    was written in autocommit, and its next attempt resumes from it. A job handing itself
    back (ResumeLater) failed at nothing: its writes stay, as a worker's would, beside the
    checkpoint that says they are done.
    """
    alias = job._state.db or "default"
    # The savepoint's own depth: a TestCase has transactions of its own around run_jobs().
    savepoint_depth = len(connections[alias].atomic_blocks) + 1
    try:
        with transaction.atomic(using=alias):
            try:
                return async_jobs.call(registered, job)
            except ResumeLater as exc:
                handed_back = exc
    except BaseException:
        if job._checkpoint_depth == savepoint_depth:  # written in the savepoint alone
            job._owned(job.worker).update(checkpoint_state=job.checkpoint_state)
        raise
    raise handed_back


def _handed_back(job: Job, worker: str, delay: float, outage: Outage) -> str | None:
    """The job raised ResumeLater: READY again in `delay` seconds, uncharged, its checkpoint kept.

    No outcome, as for a job released at shutdown: no job_finished, nothing counted in
    metrics, no retry. One asked to stop is recorded cancelled instead, and reported so.
    """
    status = _write(outage, job, lambda: job.hand_back(worker, delay), "handing back")
    if status is None:
        _dropped(job, JobStatus.READY)
    elif status == JobStatus.FAILED:  # asked to stop: recorded cancelled (models/cancelling.py)
        finished(job, status)
        _failed(job, job.errors[-1], None)
    else:
        logger.info(
            "Job handed back to resume later id=%s name=%s attempts=%s delay=%.1fs checkpoint=%s",
            job.pk,
            job.name,
            job.attempts,
            delay,
            "stored" if job.checkpoint_state is not None else "none",
            extra=log_fields.for_job(job),
        )
    return status


def record_failure(
    job: Job, worker: str, failure: BaseException, registered, outage: Outage, min_delay: float = 0.0
) -> str | None:
    """Store a failed attempt: a retry after backoff (at least `min_delay`), or the dead letters."""
    error = error_record(failure, job, worker)
    if job.attempts >= job.max_attempts or isinstance(failure, JobCancelled):  # a cancel is final
        return _dead_letter(job, worker, error, outage, failure)
    backoff = registered.options.backoff if registered is not None else None
    delay = max(RetryPolicy.for_job(backoff).delay(job.attempts), min_delay)
    logger.warning(
        "Job will retry id=%s name=%s attempt=%s delay=%.1fs error=%s",
        job.pk,
        job.name,
        job.attempts,
        delay,
        error["summary"],
        exc_info=failure,
        extra=log_fields.for_job(job),
    )
    status = _store(
        job, outage, lambda e: job.mark_for_retry(worker, e, delay), error, JobStatus.READY, failure
    )
    if status == JobStatus.FAILED:  # asked to stop: recorded cancelled instead (models/cancelling.py)
        _failed(job, job.errors[-1], failure)
    return status


def store_success(job: Job, worker: str, value: Any, outage: Outage) -> str | None:
    """Store one success; a return value the database refuses fails the job instead.

    The job ran, so running it again would repeat its effects: it goes to the dead
    letters with an error saying why, where an operator can retry it.
    """
    try:
        if _write(outage, job, lambda: job.mark_succeeded(worker, value), "storing the outcome"):
            finished(job, JobStatus.SUCCESSFUL)
            return JobStatus.SUCCESSFUL
        _dropped(job, JobStatus.SUCCESSFUL)
        return None
    except Exception as exc:  # noqa: BLE001 - a value the database refuses (classified by _write)
        return _unstorable(job, worker, without_worker_frames(exc), outage, by_database=True)


def _unstorable(job: Job, worker: str, exc: BaseException, outage: Outage, by_database: bool) -> str | None:
    return _dead_letter(job, worker, unstorable_error(exc, job, worker, by_database), outage, exc)


def _dead_letter(
    job: Job, worker: str, error: dict, outage: Outage, exc: BaseException | None, unstarted: bool = False
) -> str | None:
    write = lambda e: job.mark_failed(worker, e, unstarted)  # noqa: E731
    status = _store(job, outage, write, error, JobStatus.FAILED, exc)
    if status is not None:
        _failed(job, error, exc)
    return status


def _failed(job: Job, error: dict, exc: BaseException | None) -> None:
    # One log record per failed job: a Task's is Django's (task_finished, sent by _store()).
    level = RegisteredJob.dead_letter_log_level(registry.lookup(job.name))
    logger.log(
        level,
        "Job failed id=%s name=%s attempts=%s error=%s",
        job.pk,
        job.name,
        job.attempts,
        error["summary"],
        exc_info=exc if level == logging.ERROR else None,
        extra=log_fields.for_job(job),
    )
    send(job_failed, job=job, error=job.errors[-1] if job.errors else error)


def _unknown(job: Job, worker: str, exc: UnknownJob, outage: Outage) -> str | None:
    """A job this worker does not know: never imported or called; back for a worker that does.

    During a rolling deploy new job names reach the table before every worker knows
    them. The pickup is undone and the job waits with backoff; only once
    DBJOBS_UNKNOWN_JOB_GRACE has passed since it was enqueued is it dead-lettered.
    """
    grace = settings.UNKNOWN_JOB_GRACE
    error = error_record(exc, job, worker, summary=unknown_jobs.summary(job.name, worker, grace))
    waited = (timezone.now() - job.enqueued_at).total_seconds() if job.enqueued_at else 0.0
    delay = min(UNKNOWN_JOB_MAX_DELAY, max(1.0, waited / 10))
    status = _write(outage, job, lambda: job.mark_unknown(worker, error, delay, grace), "handing back")
    if status is None:
        _dropped(job, "READY")
    elif status == JobStatus.FAILED and job.errors[-1]["exception_class_path"] == CANCELLED:  # asked to stop
        finished(job, status)
        _failed(job, job.errors[-1], None)
    elif status == JobStatus.FAILED:
        logger.error(
            "Job failed: no worker knew its name within DBJOBS_UNKNOWN_JOB_GRACE id=%s name=%s grace=%ss",
            job.pk,
            job.name,
            grace,
            extra=log_fields.for_job(job),
        )
        finished(job, status)
        send(job_failed, job=job, error=error)
    else:
        logger.warning(
            "Job handed back: this worker does not know it id=%s name=%s delay=%.1fs%s",
            job.pk,
            job.name,
            delay,
            unknown_jobs.first_time_hint(job.name, grace),
            extra=log_fields.for_job(job),
        )
        finished(job, status)
    return status


def _store(
    job: Job,
    outage: Outage,
    write: Callable[[dict], bool],
    error: dict,
    status: str,
    failure: BaseException | None,
) -> str | None:
    """Store a failed attempt (retry or dead letter); fall back to a shorter record if refused.

    Raises if the database refuses even that: the job is still RUNNING under this
    worker, which then gives it back (JobThreads, Worker.outcome_not_stored()).
    """
    # ASCII only: a MySQL table in latin1 or utf8mb3 refuses emoji in an error message.
    short = {
        **error,
        "traceback": "",
        "summary": error["summary"][:200].encode("ascii", "backslashreplace").decode("ascii"),
    }
    try:
        won = _write(outage, job, lambda: write(error), "storing the outcome")
    except Exception as exc:  # noqa: BLE001 - a refused value: try the shorter record
        logger.error(
            "Could not store the error of job id=%s, storing a shorter one: %s",
            job.pk,
            exc,
            extra=log_fields.for_job(job),
        )
        won = _write(outage, job, lambda: write(short), "storing the outcome")
    if won:
        status = job.status  # a retry of a job asked to stop is FAILED (models/cancelling.py)
        finished(job, status, failure)
        return status
    _dropped(job, status)
    return None


def _write(outage: Outage, job: Job, write: Callable[[], Any], what: str) -> Any:
    """Run a fenced write for `job` through outages; raise the error of a refused value.

    Returns None, like a lost lease, when the worker is stopped before it got through
    or the database is missing the app's tables.
    """
    try:
        return outage.call(write, f"{what} of job {job.pk}")
    except MissingMigrations:
        logger.exception("Cannot store the outcome of job id=%s", job.pk, extra=log_fields.for_job(job))
        return None


def _dropped(job: Job, status: str) -> None:
    logger.warning(
        "Job outcome dropped: this worker no longer owns it id=%s name=%s status=%s",
        job.pk,
        job.name,
        status,
        extra=log_fields.for_job(job),
    )


FailureListener = Callable[[Job, BaseException], None]
#: Called with (job, exception) for each failed attempt stored in this context: how
#: testing.run_jobs(raise_errors=True) gets the exception back.
failure_listener: contextvars.ContextVar[FailureListener | None] = contextvars.ContextVar(
    "failure_listener", default=None
)


def finished(job: Job, status: str, failure: BaseException | None = None) -> None:
    """Log and signal an outcome that was stored; `failure` is the attempt's exception."""
    run_hooks.outcome(job, status, failure)
    if status == JobStatus.SUCCESSFUL:
        if logger.isEnabledFor(logging.DEBUG):  # the hot path: no fields built for nothing
            logger.debug(
                "Job succeeded id=%s name=%s attempt=%s",
                job.pk,
                job.name,
                job.attempts,
                extra=log_fields.for_job(job),
            )
    elif failure is not None:
        listener = failure_listener.get()
        if listener is not None:
            listener(job, failure)
    send(job_finished, job=job, status=status)
    registered = registry.lookup(job.name)
    if registered is not None:
        registered.finished(job, status, failure)
