"""Run one claimed job and record its outcome, fenced on the worker owning it."""

from __future__ import annotations

import datetime
import logging
import time
import traceback
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, InterfaceError, connections

from . import db, registry, validation
from .context import running
from .exceptions import UnknownJob
from .models import Job, JobStatus
from .retry import RetryPolicy
from .signals import job_failed, job_finished, job_started

logger = logging.getLogger("django_dbjobs")

MAX_SUMMARY_CHARS = 1000
MAX_TRACEBACK_CHARS = 64_000
#: How long a finishing write keeps retrying through database errors.
STORE_RETRY_SECONDS = 300.0


def run(job: Job, worker: str, on_success: Callable[[Job, Any], None] | None = None) -> str | None:
    """Run `job` (claimed by `worker`) and store the outcome.

    Return the status stored, or None if the lease was lost and the outcome dropped.
    Never raises: whatever the job does is recorded as its outcome. With
    `on_success`, a success is handed to it (the worker stores successes in
    batches) instead of being written here.
    """
    try:
        registered = registry.get(job.name)
    except UnknownJob as exc:
        # Never import or call what an unregistered row names: fail it for good.
        return _dead_letter(job, worker, error_record(exc, job, worker))
    with running(job):
        try:
            job_started.send(sender=Job, job=job)
            logger.debug("Job started id=%s name=%s attempt=%s", job.pk, job.name, job.attempts)
            result = registered.func(*job.args, **job.kwargs)
            result = validation.json_value(result, "The return value", db.rejects_nul(job._state.db))
        except BaseException as exc:  # noqa: B036 - SystemExit from a job is its failure
            error = error_record(exc, job, worker)
        else:
            error = None
        finally:
            close_broken_connections()
    if error is None:
        if on_success is not None:
            on_success(job, result)
            return JobStatus.SUCCESSFUL
        return _store(job, lambda: job.mark_succeeded(worker, result), JobStatus.SUCCESSFUL)
    if job.attempts >= job.max_attempts:
        return _dead_letter(job, worker, error)
    delay = RetryPolicy.for_job(registered.options.backoff).delay(job.attempts)
    logger.warning(
        "Job will retry id=%s name=%s attempt=%s delay=%.1fs error=%s",
        job.pk,
        job.name,
        job.attempts,
        delay,
        error["summary"],
    )
    return _store(job, lambda: job.mark_for_retry(worker, error, delay), JobStatus.READY)


def _dead_letter(job: Job, worker: str, error: dict) -> str | None:
    status = _store(job, lambda: job.mark_failed(worker, error), JobStatus.FAILED)
    if status is not None:
        logger.error(
            "Job failed id=%s name=%s attempts=%s error=%s",
            job.pk,
            job.name,
            job.attempts,
            error["summary"],
        )
        job_failed.send(sender=Job, job=job, error=error)
    return status


def _store(job: Job, write: Callable[[], bool], status: str) -> str | None:
    """Run a fenced finishing write, retrying through database outages."""
    if not retry_database_errors(write, f"storing the outcome of job {job.pk}"):
        logger.warning(
            "Job outcome dropped: this worker no longer owns it id=%s name=%s status=%s",
            job.pk,
            job.name,
            status,
        )
        return None
    finished(job, status)
    return status


def finished(job: Job, status: str) -> None:
    """Log and signal an outcome that was stored."""
    if status == JobStatus.SUCCESSFUL:
        logger.debug("Job succeeded id=%s name=%s attempt=%s", job.pk, job.name, job.attempts)
    job_finished.send(sender=Job, job=job, status=status)


def retry_database_errors(write: Callable[[], bool], what: str) -> bool:
    """Call `write` until it gets through; database errors are logged and retried."""
    deadline = time.monotonic() + STORE_RETRY_SECONDS
    pause = 0.2
    while True:
        try:
            return write()
        except (DatabaseError, InterfaceError) as exc:
            if time.monotonic() > deadline:
                logger.error("Gave up %s after database errors: %s", what, exc)
                return False
            logger.warning("Database error while %s, retrying in %.1fs: %s", what, pause, exc)
            close_broken_connections()
            time.sleep(pause)
            pause = min(pause * 2, 10.0)


def error_record(exc: BaseException, job: Job, worker: str) -> dict:
    """The stored record of one failed attempt; text is made safe for any database."""
    cls = type(exc)
    summary = clean_text(f"{cls.__name__}: {exc}" if str(exc) else cls.__name__)
    return {
        "exception_class_path": f"{cls.__module__}.{cls.__qualname__}",
        "traceback": clean_text("".join(traceback.format_exception(exc)))[-MAX_TRACEBACK_CHARS:],
        "summary": summary[:MAX_SUMMARY_CHARS],
        "attempt": job.attempts,
        "worker": worker,
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    }


def clean_text(text: str) -> str:
    """Replace what some databases cannot store: NUL, and unpaired surrogates."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def close_broken_connections() -> None:
    """Close this thread's connections that saw errors and fail a liveness check."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and connection.errors_occurred:
            if connection.is_usable():
                connection.errors_occurred = False
            else:
                connection.close()
