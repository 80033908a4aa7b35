"""BatchedDeletes: cancelling and deleting many jobs, a batch per transaction, each fenced on its status."""

from __future__ import annotations

from django.db import OperationalError, connections, transaction
from django.db.models import Q
from django.db.models.functions import Now

from .. import db
from . import settling
from .states import Blocked, JobStatus
from .workflow import JobDependency

#: Rows changed per statement (and per transaction) by the batched changes of many jobs.
BATCH_SIZE = 500


class BatchedDeletes:
    """JobQuerySet's (models/queryset.py) cancel and fenced deletes, in batches of primary keys."""

    def cancel(self, batch_size: int = BATCH_SIZE) -> int:
        """Cancel these jobs: delete the READY ones, ask the RUNNING ones to stop; return how many.

        READY jobs are deleted `batch_size` at a time; a job a worker claimed meanwhile,
        or one that finished, is never deleted. A RUNNING job's worker interrupts it within
        about a second and records it FAILED with JobCancelled, never retried
        (request_cancel()); one that finishes first keeps its outcome.
        """
        jobs = self.using(self._write_db())
        # Running ones first: one given back to READY meanwhile is then deleted, or recorded
        # cancelled at its next claim. Again after the deletes: one claimed before its
        # batch was deleted is asked too.
        asked = jobs.request_cancel()
        deleted = jobs.delete_ready(batch_size)
        return deleted + asked + jobs.request_cancel()

    def delete_ready(self, batch_size: int = BATCH_SIZE) -> int:
        """Delete the READY jobs among these, `batch_size` at a time; return how many.

        A job a worker claimed meanwhile, or one that finished, is never deleted. A job of
        a workflow (in a batch, waited for, or waiting) is recorded cancelled instead, so
        its batch and the jobs waiting for it learn of it (models/settling.py).
        """
        ready = self.using(self._write_db()).ready()
        # Fenced in the DELETE itself: a job others start waiting for meanwhile (its flag set
        # under its row lock) is left to the cancel that follows, in the same transaction.
        plain = Q(batch__isnull=True, has_dependents=False) & ~Q(blocked=Blocked.AFTER)
        done = 0
        for pks in ready._batches(batch_size):
            with transaction.atomic(using=ready.db):
                done += ready._delete_rows(pks, JobStatus.READY, plain)
                done += settling.cancel_ready(self.model, ready.db, pks)  # the workflows' rest
        return done

    def request_cancel(self) -> int:
        """Ask these RUNNING jobs to stop (fenced on RUNNING, once each); return how many were asked.

        A deadlock with a worker's outcome writes (MySQL) is retried.
        """
        using = self._write_db()
        asked = self.using(using).running().filter(cancel_requested_at__isnull=True)
        if connections[using].in_atomic_block:  # the caller's transaction: a deadlock ends it whole
            return asked.update(cancel_requested_at=Now())
        for attempt in range(3):
            try:
                with transaction.atomic(using=using):
                    return asked.update(cancel_requested_at=Now())
            except OperationalError as exc:
                if attempt == 2 or db.error_kind(exc, using) is not db.ErrorKind.OUTAGE:
                    raise
        return 0

    def _delete_in_batches(self, status: str, batch_size: int, fence: Q | None = None) -> tuple[int, int]:
        """Delete these rows if still `status` (and `fence`), a batch at a time; return (deleted, skipped).

        Each batch is one DELETE in its own short transaction, fenced on the status in
        its WHERE clause. No delete signals are sent.
        """
        deleted = skipped = 0
        for pks in self._batches(batch_size):
            with transaction.atomic(using=self.db):
                count = self._delete_rows(pks, status, fence)
            deleted += count
            skipped += len(pks) - count
        return deleted, skipped

    def _delete_rows(self, pks: list[str], status: str, fence: Q | None = None) -> int:
        """DELETE these rows if still `status` (and `fence`), with the dependency rows of those
        that waited for other jobs; return how many jobs were deleted."""
        rows = self.model._base_manager.using(self.db).filter(pk__in=pks, status=status)
        count = (rows.filter(fence) if fence is not None else rows)._raw_delete(self.db)
        edges = JobDependency.objects.using(self.db)
        if count and edges.exists():
            edges.filter(job__in=pks).exclude(
                job__in=self.model._base_manager.filter(pk__in=pks)
            )._raw_delete(self.db)
        return count

    def _batches(self, batch_size: int):
        """The primary keys of these rows, in key order, one list per batch (keyset pagination)."""
        rows = self.order_by("pk").values_list("pk", flat=True)
        last = None
        while True:
            pks = list((rows if last is None else rows.filter(pk__gt=last))[:batch_size])
            if not pks:
                return
            yield pks
            last = pks[-1]
