"""Deleting old finished jobs: DBJOBS_KEEP_SUCCEEDED and DBJOBS_KEEP_FAILED.

Only SUCCESSFUL and FAILED jobs are ever deleted, those that finished longer ago than
their setting says, by the database clock. Each batch is read from the finished-jobs
index (status, finished_at, id) and deleted by primary key in its own short
transaction, fenced on the status: a job retried from the dead letters meanwhile is
READY again and stays. Workers prune as they go (Pruner.prune_if_due(), one batch a
round (more while it catches up), and one batch of dead letters stored without their cause given theirs:
observability/missing_causes.py); ``manage.py prune_jobs`` does it on demand.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Iterator

from django.db import DatabaseError, InterfaceError, transaction

from .. import db
from ..conf import settings
from ..db.outage import close_broken_connections
from ..flow import admission
from ..models import Job, JobDependency, JobStatus
from ..observability import log_fields, missing_causes
from . import batch_retention

logger = logging.getLogger("django_dbjobs")

#: The index batches are read on: finished jobs by status and finish time (models.Job).
FINISHED_INDEX = "dbjobs_job_finished_idx"
#: Rows deleted per statement: short row locks, and a statement any database takes.
BATCH_SIZE = 1000
#: Seconds between a worker's pruning rounds, and between rounds while it catches up.
PRUNE_INTERVAL = 60.0
CATCH_UP_INTERVAL = 0.25
#: Seconds a round goes on deleting full batches of one status while it catches up.
ROUND_BUDGET = 0.025
#: Statuses pruned, with the setting that says how long each is kept.
KEPT_BY = {JobStatus.SUCCESSFUL: "KEEP_SUCCEEDED", JobStatus.FAILED: "KEEP_FAILED"}


#: The longest keep time that means something: a century (longer would overflow date arithmetic).
MAX_KEEP = 100 * 365 * 86400.0


def seconds(value) -> float | None:
    """A DBJOBS_KEEP_* value (seconds or a timedelta; None: forever) in seconds."""
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return None if value is None else float(value)


def kept_for(status: str) -> float | None:
    """How long finished jobs of `status` are kept, in seconds; None: forever."""
    return seconds(getattr(settings, KEPT_BY[status]))


def old_jobs(status: str, older_than: float, queues: list[str] | None = None, using: str = "default"):
    """The `status` jobs that finished more than `older_than` seconds ago (database clock)."""
    return (
        Job.objects.using(using)
        .filter(status=status, finished_at__lt=db.seconds_from_now(-older_than))
        .for_queues(queues)
    )


def delete_batch(status: str, older_than: float, queues=None, using="default", batch_size=BATCH_SIZE) -> int:
    """Delete up to `batch_size` of the oldest such jobs; return how many were deleted.

    Where the database can, the batch is locked with SKIP LOCKED as it is picked, so
    workers pruning at once take different rows instead of waiting on each other's.
    """
    with transaction.atomic(using=using):
        picked = old_jobs(status, older_than, queues, using).order_by("finished_at", "id")
        if db.can_skip_locked(using):
            picked = picked.select_for_update(skip_locked=True)
        pks = db.pks_on_index(picked, FINISHED_INDEX, batch_size)
        if not pks:
            return 0
        # Fenced on the status and the age again: a dead letter retried (and failed again)
        # since it was picked is neither.
        fence = {"status": status, "finished_at__lt": db.seconds_from_now(-older_than)}
        deleted = Job._base_manager.using(using).filter(pk__in=pks, **fence)._raw_delete(using)
        edges = JobDependency.objects.using(using)
        if edges.exists():  # the jobs some of these waited for: their rows go with them
            edges.filter(job__in=pks)._raw_delete(using)
        return deleted


def prune(
    status: str,
    older_than: float,
    queues: list[str] | None = None,
    using: str = "default",
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int], None] = lambda deleted: None,
) -> int:
    """Delete every such job, a batch at a time; call `progress` with the running total."""
    deleted = 0
    for count in _batches(status, older_than, queues, using, batch_size):
        deleted += count
        progress(deleted)
    return deleted


def _batches(status, older_than, queues, using, batch_size) -> Iterator[int]:
    while True:
        count = delete_batch(status, older_than, queues, using, batch_size)
        if not count:
            return
        yield count


class Pruner:
    """A worker's share of retention: rounds a minute apart, more often while it catches up.

    A round deletes one batch of each status. When a batch comes back full (a backlog),
    the round goes on with that status while it has taken under ROUND_BUDGET seconds, and
    the next round comes CATCH_UP_INTERVAL later: a worker holds its loop for one short
    DELETE at a time and about a tenth of its time, and deletes thousands of
    finished jobs a second while behind, where one batch a second deleted at most 1,000 and
    fell behind a steady 2,000 finishing (bench/sustained.py; docs/performance.rst). Deletions
    are logged once a round, at most once a minute per status while catching up.
    """

    def __init__(self, using: str):
        self.using = using
        self._next = 0.0
        #: Per status: jobs deleted not yet logged, and when the last line was logged.
        self._unlogged: dict[str, int] = {}
        self._logged: dict[str, float] = {}

    def prune_if_due(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + PRUNE_INTERVAL
        try:
            for status in KEPT_BY:
                keep = kept_for(status)
                if keep is None:
                    continue
                count, behind = self._prune(status, keep, now + ROUND_BUDGET)
                self._log(status, count, keep, behind)
                if behind:
                    self._next = now + CATCH_UP_INTERVAL
            # The lock rows of concurrency keys no job holds or waits for any more.
            if admission.prune_idle_keys(self.using, BATCH_SIZE) >= BATCH_SIZE:
                self._next = now + CATCH_UP_INTERVAL
            # Finished batches kept as long as their jobs, then deleted with them.
            kept = (kept_for(JobStatus.SUCCESSFUL), kept_for(JobStatus.FAILED))
            if batch_retention.delete_old_batches(*kept, using=self.using):  # maybe more: soon again
                self._next = now + CATCH_UP_INTERVAL
            # Dead letters a worker on older code stored without their cause (a rolling deploy).
            if missing_causes.fill_in(self.using) >= missing_causes.BATCH_SIZE:
                self._next = now + CATCH_UP_INTERVAL
        except (DatabaseError, InterfaceError) as exc:
            logger.warning("Database error while pruning finished jobs: %s", exc)
            close_broken_connections()
        except Exception:  # noqa: BLE001 - retention must never stop the worker
            logger.exception("Could not prune finished jobs")

    def _prune(self, status: str, keep: float, until: float) -> tuple[int, bool]:
        """Delete batches of `status` while they come back full, until monotonic `until`:
        (how many were deleted, whether more are due). A batch is started only if one as
        long as the last would end in time: the round keeps to its budget."""
        deleted = 0
        while True:
            started = time.monotonic()
            count = delete_batch(status, keep, using=self.using, batch_size=BATCH_SIZE)
            deleted += count
            if count < BATCH_SIZE:
                return deleted, False
            ended = time.monotonic()
            if ended + (ended - started) > until:
                return deleted, True

    def _log(self, status: str, count: int, keep: float, behind: bool) -> None:
        """Log what a round deleted; while catching up, once a minute for the minute's rounds."""
        total = self._unlogged.get(status, 0) + count
        now = time.monotonic()
        if not total or (behind and now - self._logged.get(status, 0.0) < PRUNE_INTERVAL):
            self._unlogged[status] = total
            return
        self._unlogged[status], self._logged[status] = 0, now
        logger.info(
            "Pruned finished jobs status=%s deleted=%s older_than=%ss",
            status,
            total,
            keep,
            extra=log_fields.for_count(total),
        )
