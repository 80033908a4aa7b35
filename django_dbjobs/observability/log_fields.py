"""The fields every log line about a job carries as ``extra``: its id, name, queue and attempt.

Named ``job_*`` so they clash neither with a LogRecord's own attributes (``name`` is the
logger's) nor with a user's extras; a JSON formatter finds them on the record. Imports
nothing of the package, so every layer may use it (signals.py, at the bottom, does).
"""

from __future__ import annotations

from typing import Any, Protocol


class _Job(Protocol):
    id: Any
    name: Any
    queue: Any
    attempts: Any


#: The record attributes for_job() sets, in the order the docs list them.
JOB_FIELDS = ("job_id", "job_name", "job_queue", "job_attempt")


def for_job(job: _Job) -> dict[str, Any]:
    """The ``extra`` of a log line about `job` (on the worker's hot path: one dict literal)."""
    return {"job_id": job.id, "job_name": job.name, "job_queue": job.queue, "job_attempt": job.attempts}


def for_count(jobs: int) -> dict[str, Any]:
    """The ``extra`` of a log line about `jobs` jobs at once (a sweep, a release)."""
    return {"job_count": jobs}


def for_schedule(name: str, job: _Job | None = None) -> dict[str, Any]:
    """The ``extra`` of a log line about the schedule `name`, and about the job it enqueued if any."""
    extra = for_job(job) if job is not None else {}
    extra["schedule_name"] = name
    return extra
