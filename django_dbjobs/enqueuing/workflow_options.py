"""enqueue()'s workflow options: the batch a job joins (``batch=``, or the open ``batch()``
block), and the jobs it waits for (``after=``). The bookkeeping at their outcomes is
models/settling.py's."""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from typing import Any

from django.db.models import F

from ..exceptions import BatchFinished, InvalidJob
from ..models import Batch, Blocked, Job, JobDependency, JobStatus, settling

#: The batch that ``with batch(...)`` opened in this context: (database alias, batch id).
open_batch: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "dbjobs_open_batch", default=None
)
#: The jobs that ``with after(...)`` makes every job enqueued in it wait for: (ids, run on failure).
open_after: contextvars.ContextVar[tuple[list[str], bool] | None] = contextvars.ContextVar(
    "dbjobs_open_after", default=None
)
#: The most jobs one job can wait for.
MAX_AFTER = 1000
AFTER_FAILURE = ("cancel", "run")


def batch_of(batch: Any, using: str) -> str | None:
    """The id of the batch a new job joins: `batch` (a Batch or its id), else the open one."""
    if batch is None:
        opened = open_batch.get()
        if opened is None:
            return None
        alias, batch_id = opened
        if alias != using:
            raise InvalidJob(f"This job goes to database {using!r}, its batch is in {alias!r}.")
        return batch_id
    batch_id = batch.pk if isinstance(batch, Batch) else batch
    if not isinstance(batch_id, str) or not batch_id:
        raise InvalidJob(f"batch must be a Batch or a batch id, not {batch!r}.")
    return batch_id


def join(using: str, batch_id: str, count: int) -> None:
    """Count `count` more jobs in a batch (in the caller's transaction); BatchFinished if it
    has finished, InvalidJob if there is no such batch."""
    if (
        Batch.objects.using(using)
        .filter(pk=batch_id, finished_at__isnull=True)
        .update(total=F("total") + count)
    ):
        return
    if Batch.objects.using(using).filter(pk=batch_id).exists():
        raise BatchFinished(
            f"Batch {batch_id} has finished and its callbacks ran; start a new batch for more jobs."
        )
    raise InvalidJob(f"There is no batch {batch_id}.")


def waits(after: Iterable[Any] | None, after_failure: str | None) -> tuple[list[str], bool]:
    """The ids of the jobs a new job waits for, and whether it runs if one fails: as given,
    else as the open ``after()`` block says."""
    opened = open_after.get()
    if after is None and opened is not None:  # the block's jobs; after_failure, if given, over its own
        return opened[0], opened[1] if after_failure is None else runs_on_failure(after_failure)
    return upstream_ids(after), runs_on_failure(after_failure or "cancel")


def runs_on_failure(after_failure: str) -> bool:
    """Whether a waiting job runs when a job it waits for fails ("run"), or is cancelled ("cancel")."""
    if after_failure not in AFTER_FAILURE:
        raise InvalidJob(f"after_failure must be 'cancel' or 'run', not {after_failure!r}.")
    return after_failure == "run"


def upstream_ids(after: Iterable[Any] | None) -> list[str]:
    """The ids of the jobs `after` names (Jobs, task results, or ids), validated."""
    if after is None:
        return []
    if isinstance(after, str | Job) or not isinstance(after, Iterable):
        raise InvalidJob("after must be a list of jobs (or their ids), such as after=[job_a, job_b].")
    ids = []
    for item in after:
        pk = getattr(item, "id", item)
        if not isinstance(pk, str) or not pk:
            raise InvalidJob(f"after: {item!r} is neither a job nor a job id.")
        if pk not in ids:
            ids.append(pk)
    if len(ids) > MAX_AFTER:
        raise InvalidJob(f"A job can wait for at most {MAX_AFTER} jobs, not {len(ids)}.")
    return ids


def wait_for(using: str, upstream: list[str]) -> tuple[set[str], list[str]]:
    """Mark the `upstream` jobs as waited for; return the ids of those not finished, and of
    those that failed. InvalidJob, writing nothing it keeps, if one does not exist.

    In the caller's transaction: the flag is set under each active job's row lock, so a
    worker finishing one either finishes it first (and it is seen finished here) or sees
    the flag (models/job_outcomes.py).
    """
    jobs = Job.objects.using(using)
    active = [JobStatus.READY, JobStatus.RUNNING]
    jobs.filter(pk__in=sorted(upstream), status__in=active, has_dependents=False).update(has_dependents=True)
    found = dict(jobs.select_for_update().filter(pk__in=upstream).order_by("pk").values_list("pk", "status"))
    missing = [pk for pk in upstream if pk not in found]
    if missing:
        raise InvalidJob(f"after: there is no job {', '.join(missing)} (deleted, or never enqueued).")
    pending = {pk for pk, status in found.items() if status in active}
    failed = [pk for pk, status in found.items() if status == JobStatus.FAILED]
    return pending, failed


def waiting_fields(pending: set[str], failed: list[str], run_on_failure: bool) -> dict[str, Any]:
    """The fields of a new job that waits for the `pending` jobs (none: it is claimable at once)."""
    if pending and not (failed and not run_on_failure):
        return {"blocked": Blocked.AFTER, "waiting_for": len(pending)}
    return {}


def link(
    using: str,
    new: list[Job],
    upstream: list[str],
    pending: set[str],
    failed: list[str],
    run_on_failure: bool,
) -> None:
    """Store the dependency rows of new jobs that wait; cancel them now if a job they wait
    for failed (and they do not run anyway)."""
    JobDependency.objects.using(using).bulk_create(
        [
            # Counted already unless still to finish: a job retried from the dead letters
            # and finished later changes nothing for a job that did not wait for it.
            JobDependency(
                job_id=job.pk, upstream=pk, run_on_failure=run_on_failure, counted=pk not in pending
            )
            for job in new
            for pk in upstream
        ]
    )
    if failed and not run_on_failure:
        summary = f"DependencyFailed: job {', '.join(sorted(failed))} it waited for failed"
        rows = Job._base_manager.using(using).filter(pk__in=[job.pk for job in new])
        settling.cancel_unstarted(rows, settling.DEPENDENCY_FAILED, summary)
        settling.settle(Job, using, [settling.Final(job.pk, job.batch_id, False, False) for job in new])
        for job in new:
            job.status = JobStatus.FAILED
