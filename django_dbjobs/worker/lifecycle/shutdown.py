"""A graceful shutdown: finish what runs within the grace, give back the rest, leave no trace.

Prefetched jobs no thread has started go back at once, for other workers. Running
jobs get `grace` seconds (none after a second signal); their successes are stored as
they finish. What still runs then is released (READY, attempt refunded), its late
outcome dropped by the fence, and its async coroutine cancelled so it cannot run on
beside its next attempt. A worker in doubt (a claim that may have committed unread, a
release that failed) gives back what it owns in the database and no longer holds, but
not a stuck job whose call runs on (stuck.py): that one is recorded last of all.
"""

from __future__ import annotations

import logging
import time

from django.db import DatabaseError, InterfaceError, connections

from ...models import WorkerProcess
from ...observability import log_fields
from ..running import async_jobs, interrupts, stuck
from .parts import Parts

logger = logging.getLogger("django_dbjobs")


def shut_down(parts: Parts, grace: float) -> None:
    """Stop the worker whose `parts` these are: finish, release, stop its threads, remove its row."""
    claimer, acks, held, wake = parts.claimer, parts.acks, parts.held, parts.wake
    claimer.release(parts.threads.take_unstarted(close=True))
    deadline = time.monotonic() + grace
    while not parts.forced.is_set() and time.monotonic() < deadline:
        if not held:
            break
        acks.flush(force=True)  # successes are stored as they finish, not when the grace ends
        parts.cancels.check_if_due()  # a job cancelled now stops now, not at the end of the grace
        parts.progress.write_if_due()
        wake.wait(min(0.1, max(deadline - time.monotonic(), 0)))
        wake.clear()
    acks.flush(force=True)
    parts.progress.write_now()  # what the jobs given back reported last is kept with them
    for job in held.all():
        if job.concurrency_key is not None:
            # Given back, its slot goes to the next job of its key: this run must not go on.
            interrupts.stop_lost(job)
    claimer.release(held.all())
    if claimer.in_doubt:
        # A claim that may have committed unread, a release that failed: what this worker
        # still owns in the database goes back now, not when a sweep finds its row gone.
        claimer.in_doubt = False
        _give_back_unheld(claimer)
    cancelled = async_jobs.cancel_all()  # released: they must not run on (async_jobs.py)
    if cancelled:
        logger.warning(
            "Cancelled async jobs still running at the end of the grace count=%s",
            cancelled,
            extra=log_fields.for_count(cancelled),
        )
    # A job that finished while the release ran: its success is stored now, or
    # dropped by the fence if the release got there first (then it runs again).
    acks.flush(force=True)
    stuck.record_deferred(parts.stuck, parts.identity.id, parts.outage)  # the last write before exit
    parts.threads.stop()
    heartbeat = parts.lease.heartbeat  # set before it starts: stopped even if the start failed after
    if heartbeat is not None:
        heartbeat.stop()
        heartbeat.join(5)
    worker = parts.identity
    try:
        WorkerProcess.objects.using(worker.using).filter(pk=worker.id).delete()
    except (DatabaseError, InterfaceError) as exc:
        logger.warning("Could not remove the worker row id=%s: %s", worker.id, exc)
    connections.close_all()
    logger.info("Worker stopped id=%s claimed=%s", worker.id, claimer.claimed)


def _give_back_unheld(claimer) -> None:
    """Claimer.release_unheld(), once; a failure is logged (the sweep recovers them later)."""
    try:
        claimer.release_unheld()
    except Exception as exc:  # noqa: BLE001 - stopping all the same: the row goes, a sweep recovers them
        logger.warning("Could not give back jobs not held id=%s: %s", claimer.identity.id, exc)
