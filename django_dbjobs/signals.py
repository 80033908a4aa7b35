"""Signals sent as jobs move through the queue.

Every job signal is sent with ``sender=Job`` and ``job=<the Job>``; job_finished also
has ``status`` and job_failed ``error`` (the last error's record).

Receivers are user code: in the worker, a receiver that raises is logged with its
traceback and the other receivers still run; the job's outcome is stored all the same.
"""

import logging
from typing import Any

from django.dispatch import Signal

from .observability import log_fields

logger = logging.getLogger("django_dbjobs")

#: After a job's row is written, inside the caller's transaction.
job_enqueued = Signal()
#: In the worker thread, just before the job's function is called.
job_started = Signal()
#: After the outcome of an attempt is stored (SUCCESSFUL, READY for a retry, FAILED).
job_finished = Signal()
#: After a job is moved to FAILED: its attempts are spent (the dead-letter list).
job_failed = Signal()
#: After a scheduler's transaction committed the jobs of a schedule's due times: sent
#: with ``sender=Schedule``, ``schedule``, ``jobs`` (the new Job rows, one per due time
#: run) and ``due_times``; also after a manual run (``manual=True``, no due time).
schedule_fired = Signal()


def has_receivers(sender: Any, *signals: Signal) -> bool:
    """Whether any of `signals` has a receiver for `sender` (the list first: most have none)."""
    return any(signal.receivers and signal.has_listeners(sender) for signal in signals)


def send(signal: Signal, sender: Any = None, **kwargs: Any) -> None:
    """Send `signal` from the worker: a receiver's exception is logged, never raised."""
    if not signal.receivers:  # the common case, and the cheapest test
        return
    if sender is None:  # a job's signal: sent by its model (Job, even for a proxy's instance)
        sender = kwargs["job"]._meta.concrete_model
    for receiver, response in signal.send_robust(sender=sender, **kwargs):
        if isinstance(response, Exception):
            subject = kwargs.get("job") or kwargs.get("schedule") or kwargs.get("task_result")
            logger.error(
                "Signal receiver %s raised for %s id=%s; the outcome is stored all the same",
                getattr(receiver, "__qualname__", receiver),
                type(subject).__name__.lower(),
                getattr(subject, "pk", getattr(subject, "id", None)),
                exc_info=response,
                extra=log_fields.for_job(kwargs["job"]) if "job" in kwargs else None,
            )
