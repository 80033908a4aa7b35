"""What a job's final outcome changes in its workflow: its batch's counts, the jobs waiting for it.

settle() runs in the transaction that stores the outcomes (a crash loses both or
neither). A batch's counters are updated under its row lock, so exactly one transaction
sees them reach the batch's total: that one sets ``finished_at`` and releases the
callbacks, stored with the batch and waiting (Blocked.AFTER). A job waiting for others
(``after=``) keeps a count of those not finished yet, updated under its own row lock:
the transaction that brings it to zero makes it claimable. Jobs outside workflows never
come here (JobOutcomes: a plain outcome write is fenced on ``has_dependents = FALSE``).
"""

from __future__ import annotations

import datetime
from collections import Counter, defaultdict
from dataclasses import dataclass

from django.db import models
from django.db.models import Case, F, Value, When
from django.db.models.functions import Greatest, Now

from .. import db
from ..exceptions import DependencyFailed, JobCancelled
from .states import Blocked, JobStatus, blocked_again, done_if_keyed
from .workflow import Batch, JobDependency

#: The error class recorded for a job cancelled because a job it waited for failed.
DEPENDENCY_FAILED = f"{DependencyFailed.__module__}.{DependencyFailed.__qualname__}"
#: The error class recorded for a job of a workflow cancelled before it ran.
CANCELLED = f"{JobCancelled.__module__}.{JobCancelled.__qualname__}"


def due_now():
    """The ``run_at`` of a job released now: due from now (its queue's lag counts from
    here), or later if it was enqueued with a later due time."""
    return Greatest(F("run_at"), Now())


@dataclass(frozen=True)
class Final:
    """A job that reached a final state in the current transaction."""

    pk: str
    batch_id: str | None
    has_dependents: bool
    succeeded: bool


def settle(job_model, using: str, finals: list[Final]) -> None:
    """Count `finals` for their batches and release or cancel the jobs waiting for them.

    Must run inside the transaction that wrote their outcomes. A cancelled waiting job is
    final too: its own batch and dependents are settled in turn.
    """
    released = False
    pending = [final for final in finals if final.batch_id or final.has_dependents]
    while pending:
        cancelled, released_now = _waiting_jobs(job_model, using, [f for f in pending if f.has_dependents])
        released = _count(job_model, using, [f for f in pending if f.batch_id]) or released or released_now
        pending = cancelled
    if released:
        db.notify_workers(using)


def _waiting_jobs(job_model, using: str, upstream: list[Final]) -> tuple[list[Final], bool]:
    """Release the jobs whose last awaited job is among `upstream`; cancel those it failed."""
    if not upstream:
        return [], False
    outcome = {final.pk: final.succeeded for final in upstream}
    # A locking read: on MySQL's REPEATABLE READ a plain one could miss an edge committed
    # since this transaction's first read.
    edges = list(
        JobDependency.objects.using(using)
        .select_for_update()
        .filter(upstream__in=list(outcome))
        .values_list("job_id", "upstream", "run_on_failure")
    )
    if not edges:
        return [], False
    jobs = job_model._base_manager.using(using)
    waiting = {
        pk: (count, batch_id, has_dependents)
        for pk, count, batch_id, has_dependents in jobs.select_for_update()
        .filter(pk__in=sorted({edge[0] for edge in edges}), status=JobStatus.READY, blocked=Blocked.AFTER)
        .order_by("pk")
        .values_list("pk", "waiting_for", "batch_id", "has_dependents")
    }
    done: Counter = Counter()
    failed_by: dict[str, list[str]] = defaultdict(list)
    for pk, upstream_pk, run_on_failure in edges:
        if pk not in waiting:
            continue  # cancelled, deleted, or released already
        if outcome[upstream_pk] or run_on_failure:
            done[pk] += 1
        else:
            failed_by[pk].append(upstream_pk)
    cancelled = []
    for pk, failed in sorted(failed_by.items()):
        _cancel(jobs, pk, failed)
        _count, batch_id, has_dependents = waiting[pk]
        cancelled.append(Final(pk, batch_id, has_dependents, succeeded=False))
    ready, still = [], defaultdict(list)
    for pk, count in done.items():
        if pk in failed_by:
            continue
        left = (waiting[pk][0] or 0) - count
        (ready if left <= 0 else still[count]).append(pk)
    for count, pks in still.items():
        jobs.filter(pk__in=pks).update(waiting_for=F("waiting_for") - count)
    if ready:
        jobs.filter(pk__in=ready).update(waiting_for=None, blocked=blocked_again(), run_at=due_now())
    return cancelled, bool(ready)


def _cancel(jobs, pk: str, failed: list[str]) -> None:
    names = ", ".join(sorted(failed))
    cancel_unstarted(
        jobs.filter(pk=pk), DEPENDENCY_FAILED, f"DependencyFailed: job {names} it waited for failed"
    )


def cancel_unstarted(jobs, error_class: str, summary: str) -> int:
    """Record these jobs, which never ran, as cancelled (FAILED, with `summary`); return how many."""
    error = {
        "exception_class_path": error_class,
        "traceback": "",
        "summary": summary,
        "attempt": 0,
        "worker": "",
        "at": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    return jobs.update(
        status=JobStatus.FAILED,
        finished_at=Now(),
        waiting_for=None,
        active_key=None,
        errors=[error],
        last_error=summary,
        blocked=done_if_keyed(),
    )


def _count(job_model, using: str, finals: list[Final]) -> bool:
    """Add `finals` to their batches' counts; finish the batches they complete. Say if any did."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for final in finals:
        counts[final.batch_id][0 if final.succeeded else 1] += 1
    finished = False
    for batch_id in sorted(counts):  # one lock order for every transaction
        succeeded, failed = counts[batch_id]
        batches = Batch.objects.using(using).filter(pk=batch_id)
        # finished_at first: MySQL evaluates SET left to right with the new values, the
        # others with the old ones; first, it reads the old counts everywhere.
        changed = batches.filter(finished_at__isnull=True).update(
            finished_at=Case(
                When(total__lte=F("succeeded") + F("failed") + (succeeded + failed), then=Now()),
                default=Value(None),
                output_field=models.DateTimeField(),
            ),
            succeeded=F("succeeded") + succeeded,
            failed=F("failed") + failed,
        )
        if not changed:
            continue  # finished already (a retried dead letter's new outcome): it stays finished
        batch = batches.get()
        if batch.finished_at is not None:
            release_callbacks(job_model, using, batch)
            finished = True
    return finished


def release_callbacks(job_model, using: str, batch: Batch) -> None:
    """Make the callbacks of a finished `batch` claimable, with its summary; drop those that do not apply."""
    run = {"on_complete"} | ({"on_failure"} if batch.failed else {"on_success"})
    callbacks = batch.callback_ids()
    jobs = job_model._base_manager.using(using).filter(status=JobStatus.READY, blocked=Blocked.AFTER)
    wanted = [pk for kind, pk in callbacks.items() if kind in run]
    unwanted = [pk for kind, pk in callbacks.items() if kind not in run]
    if wanted:
        jobs.filter(pk__in=wanted).update(
            args=[batch.summary()], waiting_for=None, blocked=blocked_again(), run_at=due_now()
        )
    if unwanted:
        jobs.filter(pk__in=unwanted)._raw_delete(using)


def cancel_ready(job_model, using: str, pks: list[str]) -> int:
    """Cancel these READY jobs of workflows without running them, and settle them; return how many.

    Deleted, they would never finish: their batch would never complete, the jobs waiting
    for them never learn. Recorded cancelled (JobCancelled), they count as failed.
    """
    jobs = job_model._base_manager.using(using)
    rows = list(
        jobs.select_for_update()
        .filter(pk__in=pks, status=JobStatus.READY)
        .order_by("pk")
        .values_list("pk", "batch_id", "has_dependents")
    )
    if not rows:
        return 0
    cancel_unstarted(
        jobs.filter(pk__in=[row[0] for row in rows]), CANCELLED, "JobCancelled: cancelled before it ran"
    )
    settle(
        job_model,
        using,
        [Final(pk, batch_id, has_dependents, False) for pk, batch_id, has_dependents in rows],
    )
    return len(rows)
