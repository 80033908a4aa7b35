"""Jobs asked to stop that a write would make READY again: recorded cancelled by that write.

A job asked to stop while it ran may be given back before its worker stopped it: released
at shutdown (or by a claim's hand-back), recovered by the sweep from a dead worker, failed
by itself with attempts left, handed back by a worker that does not know it. READY again,
it would be claimed only to be recorded cancelled, and on its way it would take a start
of its queue's rate, a slot of its concurrency key, or a wait at the gate of a job that
must run alone (the sweep gives the jobs it recovers back to run alone). Each of those
writes gives back only the jobs not asked to stop (``cancel_requested_at IS NULL`` in its
WHERE clause) and records the others cancelled here, in its transaction: no job is ever
READY with a cancel request, so no claim path ever sees one.
"""

from __future__ import annotations

import datetime

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now

from .. import db
from ..observability.fingerprints import fingerprint
from . import settling
from .states import Isolation, JobStatus, done_if_keyed

#: Why a job asked to stop was not given back, by the write that would have.
RELEASED = "JobCancelled: the job was cancelled; its worker gave it back unfinished"
RETRY = "JobCancelled: the job was cancelled; its failed attempt is not retried"
UNSTARTED = "JobCancelled: the job was cancelled before it started"
HANDED_BACK = "JobCancelled: the job was cancelled; it handed itself back unfinished (ResumeLater)"


def worker_lost(worker: str) -> str:
    return f"JobCancelled: the job was cancelled; its worker {worker} stopped heartbeating"


def record_cancelled(owned, summary: str, refund: bool, before: tuple[dict, ...] = ()) -> dict[str, list]:
    """Record cancelled the jobs of `owned` (RUNNING, fenced by the caller) asked to stop.

    FAILED with a JobCancelled error after their earlier ones (and `before`: the error of
    the attempt that just failed), never retried; with `refund` their pickup is undone
    (the attempt and its worker id), as for the jobs given back beside them. Their batches
    and the jobs waiting for them are settled in the same transaction. Return each one's
    errors as stored, by id.
    """
    using = owned.db
    model = owned.model._meta.concrete_model
    with transaction.atomic(using=using, savepoint=False):  # the caller's transaction, if it has one
        rows = list(
            owned.filter(cancel_requested_at__isnull=False)
            .select_for_update()
            .order_by("pk")
            .values_list("pk", "batch_id", "has_dependents", "errors", "attempts", "worker")
        )
        stored = {}
        cause = fingerprint({"exception_class_path": settling.CANCELLED, "summary": summary})
        for pk, _batch, _dependents, errors, attempts, worker in rows:
            record = {
                "exception_class_path": settling.CANCELLED,
                "traceback": "",
                "summary": summary,
                "attempt": attempts,
                "worker": worker or "",
                "at": datetime.datetime.now(datetime.UTC).isoformat(),
            }
            pickup = {"attempts": F("attempts") - 1, "worker_ids": db.WithoutLastWorker()} if refund else {}
            # Fenced again: SQLite has no row locks (a WAL reader may have read an older snapshot).
            if owned.filter(pk=pk).update(
                status=JobStatus.FAILED,
                finished_at=Now(),
                active_key=None,
                isolation=Isolation.NONE,
                blocked=done_if_keyed(),
                errors=[*(errors or []), *before, record],
                last_error=summary,
                error_fingerprint=cause,
                **pickup,
            ):
                stored[pk] = [*(errors or []), *before, record]
        finals = [settling.Final(pk, batch, dep, False) for pk, batch, dep, *_ in rows if pk in stored]
        settling.settle(model, using, finals)
    return stored


def mark(job, errors: list, refund: bool) -> None:
    """Make the copy `job` say what record_cancelled() stored for it (its loaded fields only)."""
    job.status, job.errors, job.last_error = JobStatus.FAILED, errors, errors[-1]["summary"]
    job.error_fingerprint = fingerprint(errors[-1])
    job.active_key, job.isolation = None, Isolation.NONE
    if refund and not {"attempts", "worker_ids"} & job.get_deferred_fields():
        job.attempts, job.worker_ids = job.attempts - 1, job.worker_ids[:-1]
