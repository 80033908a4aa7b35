"""Deleting old finished batches with their jobs (retention, for workflows).

A finished batch is kept as long as its jobs would be: DBJOBS_KEEP_SUCCEEDED after it
finished, and DBJOBS_KEEP_FAILED too if any of its jobs failed (or is a dead letter now);
then it goes with the jobs it still has, a chunk per transaction. A batch with a READY or
RUNNING job (a dead letter retried since) is never deleted, nor are its jobs. One call
deletes at most `chunks` chunks of jobs, so a worker's pruning round stays short; a
batch left half-deleted is finished in the next round.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from .. import db
from ..models import Batch, Job, JobDependency, JobStatus

#: Batches looked at per page, and job rows deleted per statement.
BATCHES_PER_PAGE = 10
CHUNK = 1000
ACTIVE = (JobStatus.READY, JobStatus.RUNNING)
FINISHED = (JobStatus.SUCCESSFUL, JobStatus.FAILED)


def delete_old_batches(
    keep_succeeded: float | None, keep_failed: float | None, using: str = "default", chunks: int = 10
) -> int:
    """Delete finished batches older than their keep times (seconds; None: forever) with their
    jobs, within `chunks` DELETEs of jobs; return how many batches were deleted."""
    if keep_succeeded is None:
        return 0
    old = Batch.objects.using(using).filter(finished_at__lt=db.seconds_from_now(-keep_succeeded))
    failed_old_enough = Q(pk__in=[])
    if keep_failed is not None:
        failed_old_enough = Q(finished_at__lt=db.seconds_from_now(-keep_failed))
    old = old.filter(Q(failed=0) | failed_old_enough).order_by("finished_at", "id")
    deleted, budget, last = 0, [chunks], None
    while budget[0] > 0:
        page = (
            old
            if last is None
            else old.filter(Q(finished_at__gt=last[0]) | Q(finished_at=last[0], id__gt=last[1]))
        )
        batches = list(page.values_list("pk", "finished_at")[:BATCHES_PER_PAGE])
        if not batches:
            break
        last = (batches[-1][1], batches[-1][0])
        pks = [pk for pk, _at in batches]
        jobs = Job.objects.using(using).filter(batch__in=pks)
        busy = set(jobs.filter(status__in=ACTIVE).values_list("batch", flat=True))
        if keep_failed is None:  # a dead letter retried in a finished batch and failed again
            busy |= set(jobs.filter(status=JobStatus.FAILED).values_list("batch", flat=True))
        else:
            failed = jobs.filter(status=JobStatus.FAILED).values_list("batch", flat=True)
            recent = set(old.filter(pk__in=pks).exclude(failed_old_enough).values_list("pk", flat=True))
            busy |= set(failed) & recent
        for pk in pks:
            if budget[0] <= 0:
                break
            if pk not in busy and _delete(using, pk, budget):
                deleted += 1
        if len(batches) < BATCHES_PER_PAGE:
            break
    return deleted


def _delete(using: str, batch_id: str, budget: list[int]) -> bool:
    """Delete one finished batch's jobs, a chunk per transaction, then the batch. False if
    it got busy again, or the budget ran out first (the next round goes on)."""
    jobs = Job._base_manager.using(using).filter(batch=batch_id)
    while budget[0] > 0:
        with transaction.atomic(using=using):
            finished = jobs.filter(status__in=FINISHED)
            pks = list(finished.values_list("pk", flat=True)[:CHUNK])
            if pks:
                budget[0] -= 1
                finished.filter(pk__in=pks)._raw_delete(using)
                JobDependency.objects.using(using).filter(job__in=pks)._raw_delete(using)
                continue
            if jobs.exists():  # retried meanwhile: active again, so the batch stays
                return False
            return bool(Batch.objects.using(using).filter(pk=batch_id)._raw_delete(using))
    return False
