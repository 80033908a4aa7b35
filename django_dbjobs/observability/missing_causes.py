"""Dead letters stored without a cause (by a worker on older code) given theirs, a bounded batch at a time.

Every write of a dead letter stores its cause (observability/fingerprints.py), and
migration 0004 gave one to those stored before. Still, during a rolling deploy a worker
on code older than causes keeps writing dead letters without one, and they would stay
out of their cause's group for good. Workers fill them in as they prune finished jobs
(operations/retention.py's Pruner: a batch a round), and so does ``manage.py prune_jobs``:
BATCH_SIZE rows at most per pass, the newest first, picked on the index of causes and
written in one short transaction, fenced on still FAILED and still without a cause.
"""

from __future__ import annotations

import logging

from django.db import connections, transaction

from .. import db
from ..models import Job, JobStatus
from . import log_fields
from .fingerprints import fingerprint

logger = logging.getLogger("django_dbjobs")

#: Dead letters given their cause per pass (one transaction).
BATCH_SIZE = 500
#: The index they are picked on: FAILED rows by error_fingerprint, finished_at, id (models.Job).
CAUSE_INDEX = "dbjobs_job_failed_cause_idx"


def without_cause(using: str = "default"):
    """The dead letters that have no cause stored."""
    return Job._base_manager.using(using).filter(status=JobStatus.FAILED, error_fingerprint__isnull=True)


def cause_of(errors, last_error) -> str:
    """The cause of a dead letter from its stored errors: its last record's, or, stored without
    any (or of an older shape), its last error's text's."""
    last = errors[-1] if errors and isinstance(errors, list) and isinstance(errors[-1], dict) else None
    try:
        return fingerprint(last or {"summary": str(last_error or "")})
    except Exception:  # noqa: BLE001 - a record of an older shape: never a row left out for good
        return fingerprint({"summary": str(last_error or "")})


#: The databases found to have the index of causes (once there, it stays).
_indexed: set[str] = set()


def _has_cause_index(using: str) -> bool:
    if using not in _indexed:
        connection = connections[using]
        with connection.cursor() as cursor:
            names = connection.introspection.get_constraints(cursor, Job._meta.db_table)
        if CAUSE_INDEX not in names:
            return False
        _indexed.add(using)
    return True


def fill_in(using: str = "default", batch_size: int | None = None) -> int:
    """Give up to `batch_size` (BATCH_SIZE) dead letters without a cause theirs, the newest
    first; return how many."""
    if not _has_cause_index(using):  # migration 0003 not applied yet (workers may start before it)
        return 0
    todo = without_cause(using)
    # All NULL, but only the index of causes gives this order: PostgreSQL, counting the NULLs
    # of every live job, would read every dead letter backwards on another (MySQL/MariaDB:
    # FORCE INDEX, and a sort of the rows without a cause only).
    newest = todo.order_by("-error_fingerprint", "-finished_at", "-pk")
    pks = db.pks_on_index(newest, CAUSE_INDEX, batch_size or BATCH_SIZE)
    if not pks:
        return 0
    causes: dict[str, list[str]] = {}
    for pk, errors, last_error in todo.filter(pk__in=pks).values_list("pk", "errors", "last_error"):
        causes.setdefault(cause_of(errors, last_error), []).append(pk)
    filled = 0
    with transaction.atomic(using=using):
        for cause, of_cause in sorted(causes.items()):
            # Fenced: a dead letter retried (or given its cause) since it was picked is left alone.
            filled += todo.filter(pk__in=of_cause).update(error_fingerprint=cause)
    if filled:
        logger.info(
            "Gave dead letters stored without a cause theirs count=%s",
            filled,
            extra=log_fields.for_count(filled),
        )
    return filled
