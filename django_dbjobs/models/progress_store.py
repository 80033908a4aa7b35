"""Storing many running jobs' progress at once, never waiting for a row another transaction holds."""

from __future__ import annotations

from django.db import DatabaseError, models, transaction
from django.db.models import Case, F, Value, When

from .. import db
from .job import Job
from .progress import Progress


def store_reports(using: str, worker: str, reports: list[tuple[Job, Progress]]) -> set[str] | None:
    """Write each job's report in one UPDATE, where `worker` still owns it at its pickup.

    Return the ids written, or None when the database was busy (SQLite: another
    transaction holds the write lock) and nothing was: tried again on the next tick.
    A row whose lock another transaction holds (a job's own, around a checkpoint())
    is skipped on PostgreSQL and MySQL/MariaDB; on SQLite, where a writing transaction
    holds the whole database, the write gives up at once instead of waiting.
    """
    wanted = {job.pk: job.pickups for job, _report in reports}
    jobs = Job.objects.using(using)
    try:
        with db.never_waiting(using), transaction.atomic(using=using):
            # By primary key, then the pickup checked here: the lock reads these rows alone.
            owned = db.lock_or_skip(jobs.owned_by(worker).filter(pk__in=list(wanted)).order_by("pk"))
            ids = {pk for pk, pickups in owned.values_list("pk", "pickups") if wanted[pk] == pickups}
            if ids:
                json = models.JSONField()
                records = [
                    When(pk=job.pk, then=Value(report.as_record(), output_field=json))
                    for job, report in reports
                    if job.pk in ids
                ]
                jobs.filter(pk__in=ids).update(
                    progress_state=Case(*records, default=F("progress_state"), output_field=json)
                )
            return ids
    except DatabaseError as exc:
        if db.is_lock_conflict(exc):
            return None
        raise
