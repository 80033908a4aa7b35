"""What a job's final outcome changes in its workflow: its batch's counts, the jobs waiting for it.

settle() runs in the transaction that stores the outcomes (a crash loses both or
neither). A batch's counters are updated under its row lock, so exactly one transaction
sees them reach the batch's total: that one sets ``finished_at`` and releases the
callbacks, stored with the batch and waiting (Blocked.AFTER). A job waiting for others
(``after=``) keeps a count of those not finished yet, updated under its own row lock:
the transaction that brings it to zero makes it claimable. Each dependency row counts
once (``counted``), so a dead letter retried and finished again changes nothing it
already changed. Jobs outside workflows never come here (JobOutcomes: a plain outcome
write is fenced on ``has_dependents = FALSE``).

Locks are taken in one order: job rows (the outcomes), then the waiting jobs, then the
batch rows in id order. A cascade (a cancelled waiting job's own dependents) takes more
job rows after batch rows; the deadlock that may rarely follow is retried by a worker's
outcome write (it waits out database errors) and by enqueue() outside a transaction;
cancel() and a dead-letter retry report it to their caller.
"""

from __future__ import annotations

import datetime
from collections import Counter, defaultdict
from dataclasses import dataclass

from django.db.models import F
from django.db.models.functions import Greatest, Now

from .. import db
from ..exceptions import DependencyFailed, JobCancelled
from ..observability.fingerprints import fingerprint
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


#: Ids per statement: well under SQLite's limit of bound parameters, however many jobs wait.
CHUNK = 500


def _chunks(items: list) -> list[list]:
    return [items[start : start + CHUNK] for start in range(0, len(items), CHUNK)]


@dataclass(frozen=True)
class Final:
    """A job that reached a final state in the current transaction."""

    pk: str
    batch_id: str | None
    has_dependents: bool
    succeeded: bool


def settle(job_model, using: str, finals: list[Final]) -> None:
    """Count `finals` for their batches and release or cancel the jobs waiting for them.

    Must run inside the transaction that wrote their outcomes. A cancelled waiting job (or
    a dropped callback others wait for) is final too: it is settled in turn.
    """
    released = False
    pending = [final for final in finals if final.batch_id or final.has_dependents]
    while pending:
        cancelled, released_now = _waiting_jobs(job_model, using, [f for f in pending if f.has_dependents])
        dropped, finished = _count(job_model, using, [f for f in pending if f.batch_id])
        released = released or released_now or finished
        pending = cancelled + dropped
    if released:
        db.notify_workers(using)


def _waiting_jobs(job_model, using: str, upstream: list[Final]) -> tuple[list[Final], bool]:
    """Release the jobs whose last awaited job is among `upstream`; cancel those it failed."""
    if not upstream:
        return [], False
    outcome = {final.pk: final.succeeded for final in upstream}
    # A locking read: on MySQL's REPEATABLE READ a plain one could miss an edge committed
    # since this transaction's first read.
    dependencies = JobDependency.objects.using(using)
    edges = list(
        dependencies.select_for_update()
        .filter(upstream__in=sorted(outcome), counted=False)
        .values_list("pk", "job_id", "upstream", "run_on_failure")
    )
    if not edges:
        return [], False
    jobs = job_model._base_manager.using(using)
    waiting = {}
    for pks in _chunks(sorted({edge[1] for edge in edges})):
        locked = jobs.select_for_update().filter(pk__in=pks, status=JobStatus.READY, blocked=Blocked.AFTER)
        for pk, count, batch_id, has_dependents in locked.order_by("pk").values_list(
            "pk", "waiting_for", "batch_id", "has_dependents"
        ):
            waiting[pk] = (count, batch_id, has_dependents)
    done: Counter = Counter()
    failed_by: dict[str, list[str]] = defaultdict(list)
    for _edge, pk, upstream_pk, run_on_failure in edges:
        if pk not in waiting:
            continue  # cancelled, deleted, or released already
        if outcome[upstream_pk] or run_on_failure:
            done[pk] += 1
        else:
            failed_by[pk].append(upstream_pk)
    # Each edge counts once: a dead letter retried and finished again finds it counted.
    for pks in _chunks([edge[0] for edge in edges]):
        dependencies.filter(pk__in=pks).update(counted=True)
    cancelled = []
    by_cause: dict[str, list[str]] = defaultdict(list)  # one UPDATE per error text, not per job
    for pk, failed in failed_by.items():
        by_cause[f"DependencyFailed: job {', '.join(sorted(failed))} it waited for failed"].append(pk)
        _count_left, batch_id, has_dependents = waiting[pk]
        cancelled.append(Final(pk, batch_id, has_dependents, succeeded=False))
    for summary, pks in sorted(by_cause.items()):
        for chunk in _chunks(sorted(pks)):
            cancel_unstarted(jobs.filter(pk__in=chunk), DEPENDENCY_FAILED, summary)
    ready, still = [], defaultdict(list)
    for pk, count in done.items():
        if pk in failed_by:
            continue
        left = (waiting[pk][0] or 0) - count
        (ready if left <= 0 else still[count]).append(pk)
    for count, pks in still.items():
        for chunk in _chunks(sorted(pks)):
            jobs.filter(pk__in=chunk).update(waiting_for=F("waiting_for") - count)
    for chunk in _chunks(sorted(ready)):
        jobs.filter(pk__in=chunk).update(waiting_for=None, blocked=blocked_again(), run_at=due_now())
    return cancelled, bool(ready)


def cancel_unstarted(jobs, error_class: str, summary: str, history: list | None = None, **changes) -> int:
    """Record these jobs as cancelled before they ran (FAILED, with `summary` after the errors
    of their earlier attempts, `history`), with `changes` besides; return how many."""
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
        errors=[*(history or []), error],
        last_error=summary,
        error_fingerprint=fingerprint(error),
        blocked=done_if_keyed(),
        **changes,
    )


def _count(job_model, using: str, finals: list[Final]) -> tuple[list[Final], bool]:
    """Add `finals` to their batches' counts and finish the batches they complete.

    Return the dropped callbacks others waited for (final now: settle them), and whether a
    batch finished (callbacks were released).
    """
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for final in finals:
        counts[final.batch_id][0 if final.succeeded else 1] += 1
    dropped: list[Final] = []
    finished = False
    for batch_id in sorted(counts):  # one lock order for every transaction
        succeeded, failed = counts[batch_id]
        done = _add(using, batch_id, succeeded=succeeded, failed=failed)
        if done is not None:
            dropped += release_callbacks(job_model, using, done)
            finished = True
    return dropped, finished


def _add(using: str, batch_id: str, succeeded: int = 0, failed: int = 0, total: int = 0) -> Batch | None:
    """Add to a batch's counts (and its total); return the batch if that finished it, read
    whole for its callbacks, else None (db/batch_counts.py)."""
    if db.add_to_batch(Batch, using, batch_id, succeeded, failed, total):
        return Batch.objects.using(using).get(pk=batch_id)
    return None


def close(job_model, using: str, batch_id: str) -> None:
    """End the ``batch()`` block of a batch: give back the count the block held (so that no
    job cancelled inside it could finish the batch early), and finish it if it is done."""
    done = _add(using, batch_id, total=-1)
    if done is not None:
        settle(job_model, using, release_callbacks(job_model, using, done))
        db.notify_workers(using)


def release_callbacks(job_model, using: str, batch: Batch) -> list[Final]:
    """Make the callbacks of a finished `batch` claimable, with its summary; drop those that
    do not apply. Return the dropped ones other jobs wait for: cancelled, to be settled."""
    run = {"on_complete"} | ({"on_failure"} if batch.failed else {"on_success"})
    callbacks = batch.callback_ids()
    jobs = job_model._base_manager.using(using).filter(status=JobStatus.READY, blocked=Blocked.AFTER)
    wanted = [pk for kind, pk in callbacks.items() if kind in run]
    unwanted = [pk for kind, pk in callbacks.items() if kind not in run]
    if wanted:
        jobs.filter(pk__in=wanted).update(
            args=[batch.summary()], waiting_for=None, blocked=blocked_again(), run_at=due_now()
        )
    if not unwanted:
        return []
    # The DELETE is fenced on the flag, which enqueue(after=...) sets under the row's lock;
    # what it leaves (waited for, even since a moment ago) is locked and cancelled, so that
    # the jobs waiting for it learn it will not run.
    jobs.filter(pk__in=unwanted, has_dependents=False)._raw_delete(using)
    awaited = list(
        jobs.select_for_update().filter(pk__in=unwanted).order_by("pk").values_list("pk", flat=True)
    )
    if awaited:
        outcome = "succeeded" if not batch.failed else "had failures"
        summary = f"JobCancelled: not run: its batch {batch.pk} {outcome}"
        # Retried, it runs with what it needs.
        cancel_unstarted(jobs.filter(pk__in=awaited), CANCELLED, summary, args=[batch.summary()])
    return [Final(pk, None, True, succeeded=False) for pk in awaited]


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
        .values_list("pk", "batch_id", "has_dependents", "errors")
    )
    if not rows:
        return 0
    summary = "JobCancelled: cancelled before it ran"
    fresh = [pk for pk, _batch, _dependents, errors in rows if not errors]
    if fresh:
        cancel_unstarted(jobs.filter(pk__in=fresh), CANCELLED, summary)
    for pk, _batch, _dependents, errors in rows:
        if errors:  # waiting for a retry: its earlier attempts' errors are kept
            cancel_unstarted(jobs.filter(pk=pk), CANCELLED, summary, history=errors)
    settle(job_model, using, [Final(pk, batch, dependents, False) for pk, batch, dependents, _e in rows])
    return len(rows)
