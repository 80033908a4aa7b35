"""A job timed out or cancelled that would not stop (blocked in C code): recorded, its process ended.

A thread cannot be killed. When deadlines.enforce() finds a job still running
deadlines.STUCK_AFTER seconds after it was interrupted, the worker's loop records the
attempt as failed with a JobTimeout (retried or dead-lettered by the usual rules, the
retry not before the stuck call's process is gone; the job's own late outcome is dropped
by the fence). The worker then stops (its other jobs finish within the grace or are given
back) and its process starts afresh (replacement.py), or, with ``--exit-when-stuck``,
exits with EXIT_STATUS for its supervisor (``run_jobs --processes``, systemd's
``Restart=``, Kubernetes) to start a fresh one: a stuck thread would otherwise hold its
slot, and the gate of jobs that run alone, for as long as the call lasts.
"""

from __future__ import annotations

import logging

from ... import registry
from ...db.outage import Outage
from ...enqueuing import enqueuer_context
from ...exceptions import JobCancelled, JobTimeout
from ...observability import log_fields
from ..claiming.held import HeldJobs
from . import deadlines, execution, interrupts

logger = logging.getLogger("django_dbjobs")

#: The status a worker exits with after a stuck job, for its supervisor to restart it.
EXIT_STATUS = 3


def record(armed, worker: str, outage: Outage, min_delay: float) -> bool:
    """Record the stuck job's attempt as timed out, its retry `min_delay` away at least.

    Return True if this worker still owned it.
    """
    job = armed.job
    registered = registry.lookup(job.name)
    if interrupts.interrupted_for_cancel(armed):
        failure = JobCancelled(
            "the job was cancelled and could not be interrupted (blocked outside Python); "
            "its worker process was ended"
        )
    else:
        failure = JobTimeout(
            f"the job ran longer than its timeout of {armed.seconds:g}s and could not be interrupted "
            "(blocked outside Python); its worker process was ended"
        )
    with enqueuer_context.restoring_safely(job.context):
        status = execution.record_failure(job, worker, failure, registered, outage, min_delay=min_delay)
    return status is not None


def _log(armed, then: str) -> None:
    job = armed.job
    if interrupts.interrupted_for_cancel(armed):
        what = "was cancelled and cannot be interrupted id=%s name=%s: %s"
        details = (job.pk, job.name)
    else:
        what = "ran past its timeout and cannot be interrupted id=%s name=%s timeout=%ss: %s"
        details = (job.pk, job.name, armed.seconds)
    logger.error("Job " + what, *details, then, extra=log_fields.for_job(job))


def give_up(armed, worker: str, outage: Outage, held: HeldJobs, grace: float, deferred: list) -> None:
    """Record the stuck job (never raises), and stop holding it: its thread may never give it back.

    Its retry waits until this process is gone, so the stuck call cannot overlap it
    (the grace, then the process's own exit: heartbeat, listener, threads, its row).
    A job with a concurrency key is recorded only at the very end of the shutdown
    (record_deferred()): its outcome frees its key's slot, and the stuck call runs on
    until the process exits.
    """
    then = "stopping this worker process (only its end stops the call)"
    if armed.job.concurrency_key is not None:
        _log(armed, then + "; recorded as it exits, its concurrency slot held until then")
        deferred.append(armed)
    else:
        _log(armed, then)
        _record_safely(armed, worker, outage, min_delay=grace + deadlines.STUCK_AFTER + 30)
    held.abandon(armed.job)  # if still owned (recording failed, or deferred): never given back


def record_deferred(deferred: list, worker: str, outage: Outage) -> None:
    """Record the stuck keyed jobs give_up() left for the end of the shutdown (never raises)."""
    for armed in deferred:
        _record_safely(armed, worker, outage, min_delay=30)


def _record_safely(armed, worker: str, outage: Outage, min_delay: float) -> None:
    try:
        record(armed, worker, outage, min_delay=min_delay)
    except Exception:  # noqa: BLE001 - the worker stops all the same
        logger.exception(
            "Could not record the timeout of job id=%s", armed.job.pk, extra=log_fields.for_job(armed.job)
        )
