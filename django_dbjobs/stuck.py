"""A job past its timeout that would not stop (blocked in C code): recorded, and its process ended.

A thread cannot be killed. When timeouts.enforce() finds a job still running
timeouts.STUCK_AFTER seconds after it was interrupted, the worker's loop records the
attempt as failed with a JobTimeout (retried or dead-lettered by the usual rules; the
job's own late outcome is dropped by the fence). Under ``run_jobs --processes`` the worker
then stops (its other jobs finish within the grace or are given back) and exits with
EXIT_STATUS, and the supervisor starts a fresh process. Without a supervisor nothing can
end the thread: it is logged, and the worker runs on with one thread fewer until it returns.
"""

from __future__ import annotations

import logging
import os

from . import enqueuer_context, execution, registry
from .exceptions import JobTimeout
from .outage import Outage

logger = logging.getLogger("django_dbjobs")

#: The status a worker exits with after a stuck job, for its supervisor to restart it.
EXIT_STATUS = 3


def supervised() -> bool:
    """Whether this worker runs under ``run_jobs --processes`` (supervisor.py)."""
    return "DBJOBS_SUPERVISOR_PID" in os.environ


def record(armed, worker: str) -> bool:
    """Record the stuck job's attempt as timed out; True if this worker still owned it."""
    job = armed.job
    registered = registry.lookup(job.name)
    failure = JobTimeout(
        f"the job ran longer than its timeout of {armed.seconds:g}s and could not be interrupted "
        "(blocked outside Python)" + ("; its worker process was ended" if supervised() else "")
    )
    with enqueuer_context.restoring_safely(job.context):
        status = execution.record_failure(job, worker, failure, registered, Outage(job._state.db))
    logger.error(
        "Job ran past its timeout and cannot be interrupted id=%s name=%s timeout=%ss: %s",
        job.pk,
        job.name,
        armed.seconds,
        "stopping this worker process for its supervisor to replace it"
        if supervised()
        else "its thread stays busy until the call returns (run_jobs --processes ends such jobs)",
    )
    return status is not None
