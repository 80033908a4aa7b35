"""Signals sent as jobs move through the queue.

Every signal is sent with ``sender=Job`` and ``job=<the Job>``; job_finished also
has ``status`` and job_failed ``error`` (the last error's record).

Receivers are user code: in the worker, a receiver that raises is logged with its
traceback and the other receivers still run; the job's outcome is stored all the same.
"""

import logging

from django.dispatch import Signal

logger = logging.getLogger("django_dbjobs")

#: After a job's row is written, inside the caller's transaction.
job_enqueued = Signal()
#: In the worker thread, just before the job's function is called.
job_started = Signal()
#: After the outcome of an attempt is stored (SUCCESSFUL, READY for a retry, FAILED).
job_finished = Signal()
#: After a job is moved to FAILED: its attempts are spent (the dead-letter list).
job_failed = Signal()


def send(signal: Signal, **kwargs) -> None:
    """Send `signal` from the worker: a receiver's exception is logged, never raised."""
    if not signal.receivers:  # the common case, and the cheapest test
        return
    from .models import Job

    for receiver, response in signal.send_robust(sender=Job, **kwargs):
        if isinstance(response, Exception):
            job = kwargs.get("job")
            logger.error(
                "Signal receiver %s raised for job id=%s; the outcome is stored all the same",
                getattr(receiver, "__qualname__", receiver),
                getattr(job, "pk", None),
                exc_info=response,
            )
