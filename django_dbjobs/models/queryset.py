"""JobQuerySet: the filters of jobs and their claim; its many-row writes come from two mixins."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import EmptyResultSet
from django.db import models, router
from django.db.models.functions import Now

from .. import db
from .batched_deletes import BatchedDeletes
from .bulk_outcomes import BulkOutcomes
from .claim_shape import claim, claim_shape
from .states import Blocked, JobStatus

if TYPE_CHECKING:
    from .job import Job


class JobQuerySet(BatchedDeletes, BulkOutcomes, models.QuerySet):
    """Jobs: filters, the claim, cancel and batched deletes (models/batched_deletes.py), and a
    worker's writes of many jobs it holds (models/bulk_outcomes.py)."""

    def ready(self) -> JobQuerySet:
        return self.filter(status=JobStatus.READY)

    def due(self) -> JobQuerySet:
        """Ready jobs whose run_at has come, by the database clock."""
        return self.ready().filter(run_at__lte=Now())

    def claimable(self) -> JobQuerySet:
        """Due jobs no flow control holds back: what a claim picks from."""
        return self.due().filter(blocked=Blocked.NONE)

    def running(self) -> JobQuerySet:
        return self.filter(status=JobStatus.RUNNING)

    def failed(self) -> JobQuerySet:
        return self.filter(status=JobStatus.FAILED)

    def finished(self) -> JobQuerySet:
        return self.filter(status__in=[JobStatus.SUCCESSFUL, JobStatus.FAILED])

    def for_queues(self, queues: list[str] | None) -> JobQuerySet:
        """Jobs on any of `queues`; None or an empty list means every queue."""
        return self.filter(queue__in=queues) if queues else self

    def owned_by(self, worker: str) -> JobQuerySet:
        """Running jobs this worker holds: the fence of every finishing write."""
        return self.running().filter(worker=worker)

    def claim(
        self,
        worker: str,
        limit: int = 1,
        queues: list[str] | None = None,
        include_waiting: bool = True,
        paused: frozenset[str] = frozenset(),
    ) -> list[Job]:
        """Lock up to `limit` due jobs (of `queues` or any, never `paused`) for `worker`; mark them running.

        Attempts are counted here, at pickup, so a job that kills its worker every
        time still runs out of attempts. Each attempt's worker is appended to
        worker_ids. With ``include_waiting=False``, jobs waiting to run alone are left for
        another claim. One short transaction (or one statement); see db.claim_jobs().

        Filters of this QuerySet narrow the claim (``Job.objects.filter(name=...).claim(...)``):
        such a claim's SQL is compiled for it alone, neither cached nor prepared.
        """
        using = self._write_db()
        try:
            narrowed = self._narrowed(using)
        except EmptyResultSet:  # .none(), pk__in=[]: nothing to claim
            return []
        return claim(
            self.model, lambda: self, using, worker, limit, queues, include_waiting, paused, narrowed
        )

    def claim_sql(
        self,
        worker: str,
        limit: int = 1,
        queues: list[str] | None = None,
        include_waiting: bool = True,
        paused: frozenset[str] = frozenset(),
    ) -> tuple[str, list]:
        """The SQL claim() runs first, with its parameters (to EXPLAIN it)."""
        using = self._write_db()
        try:
            narrowed = self._narrowed(using)
        except EmptyResultSet:
            raise ValueError(
                "This QuerySet selects no rows (.none(), pk__in=[]): claim() runs no SQL."
            ) from None
        shape = claim_shape(lambda: self, queues, include_waiting, paused, narrowed)
        if shape is None:
            raise ValueError("Every queue asked for is paused: claim() runs no SQL.")
        return db.claim_sql(self.model, using, *shape, worker, limit)

    def _write_db(self) -> str:
        """The database these jobs are changed on: this QuerySet's, else the router's for
        writes (``self.db`` asks the router for reads, unless Django marked it for a write)."""
        return self._db or router.db_for_write(self.model, **self._hints)

    def _narrowed(self, using: str) -> bool:
        """Whether this QuerySet selects other rows than the table's default manager does
        (filters, distinct, extra tables): then its claim SQL is its own, never cached."""
        if self.query.is_sliced:
            raise ValueError("claim() takes a QuerySet without a slice; claim(limit=...) says how many.")
        plain = self.model._default_manager.db_manager(using).all()
        return self.query.get_compiler(using).as_sql() != plain.query.get_compiler(using).as_sql()

    def cancel_requested(self) -> JobQuerySet:
        """Jobs asked to stop that have not stopped yet."""
        return self.filter(status__in=[JobStatus.READY, JobStatus.RUNNING], cancel_requested_at__isnull=False)
