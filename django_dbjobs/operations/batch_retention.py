"""Deleting old finished batches with their jobs (retention, for workflows).

A finished batch is kept as long as its jobs would be: DBJOBS_KEEP_SUCCEEDED after it
finished, or DBJOBS_KEEP_FAILED if any of its jobs failed; then it goes with the jobs
it still has, a chunk at a time. A batch with a READY or RUNNING job (a dead letter
retried since) is never deleted, nor are its jobs.
"""

from __future__ import annotations

from django.db import transaction

from .. import db
from ..models import Batch, Job, JobDependency, JobStatus

#: Batches looked at per round, and job rows deleted per statement.
BATCHES_PER_ROUND = 10
CHUNK = 1000
ACTIVE = (JobStatus.READY, JobStatus.RUNNING)
FINISHED = (JobStatus.SUCCESSFUL, JobStatus.FAILED)


def delete_old_batches(
    keep_succeeded: float | None, keep_failed: float | None, using: str = "default", rounds: int = 1
) -> int:
    """Delete up to `rounds` × BATCHES_PER_ROUND finished batches older than their keep time
    (seconds; None: forever), with their jobs; return how many."""
    deleted = 0
    for failed, keep in ((False, keep_succeeded), (True, keep_failed)):
        if keep is None:
            continue
        old = Batch.objects.using(using).filter(finished_at__lt=db.seconds_from_now(-keep))
        old = old.filter(failed__gt=0) if failed else old.filter(failed=0)
        for _ in range(rounds):
            pks = list(old.order_by("finished_at", "id").values_list("pk", flat=True)[:BATCHES_PER_ROUND])
            if not pks:
                break
            busy = set(
                Job.objects.using(using)
                .filter(batch__in=pks, status__in=ACTIVE)
                .values_list("batch", flat=True)
            )
            for pk in pks:
                if pk not in busy and _delete(using, pk):
                    deleted += 1
            if len(pks) < BATCHES_PER_ROUND or busy.issuperset(pks):
                break
    return deleted


def _delete(using: str, batch_id: str) -> bool:
    """Delete one finished batch's jobs, a chunk per transaction, then the batch; False if it got busy."""
    jobs = Job._base_manager.using(using).filter(batch=batch_id)
    while True:
        with transaction.atomic(using=using):
            finished = jobs.filter(status__in=FINISHED)
            pks = list(finished.values_list("pk", flat=True)[:CHUNK])
            if pks:
                finished.filter(pk__in=pks)._raw_delete(using)
                JobDependency.objects.using(using).filter(job__in=pks)._raw_delete(using)
                continue
            if jobs.exists():  # retried meanwhile: active again, so the batch stays
                return False
            return bool(Batch.objects.using(using).filter(pk=batch_id)._raw_delete(using))
