"""JobQuerySet: the filters and the fenced many-row state changes of jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import EmptyResultSet
from django.db import OperationalError, connections, models, router, transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Now

from .. import db
from . import cancelling, settling
from .claim_shape import claim, claim_shape
from .states import HANDED_BACK_PREFIX, Blocked, Isolation, JobStatus, blocked_again
from .workflow import JobDependency

if TYPE_CHECKING:
    from .job import Job


#: Rows changed per statement (and per transaction) by the batched changes of many jobs.
BATCH_SIZE = 500


class JobQuerySet(models.QuerySet):
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

    def cancel_requested(self) -> JobQuerySet:
        """Jobs asked to stop that have not stopped yet."""
        return self.filter(status__in=[JobStatus.READY, JobStatus.RUNNING], cancel_requested_at__isnull=False)

    def _delete_in_batches(self, status: str, batch_size: int) -> tuple[int, int]:
        """Delete these rows if still `status`, a batch at a time; return (deleted, skipped).

        Each batch is one DELETE in its own short transaction, fenced on the status in
        its WHERE clause. No delete signals are sent.
        """
        deleted = skipped = 0
        for pks in self._batches(batch_size):
            with transaction.atomic(using=self.db):
                count = self._delete_rows(pks, status)
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

    def _refund(
        self, isolate: bool = False, why: str = cancelling.RELEASED, expected: int | None = None
    ) -> tuple[int, dict[str, list]]:
        """Make these jobs READY with their pickup undone: the attempt and its worker id.

        With `isolate` (their worker died), each must run alone next time; otherwise
        only a job released while it ran alone keeps waiting to. A job asked to stop is
        recorded cancelled instead, uncharged, with `why` (models/cancelling.py). Return
        how many went back READY, and the errors stored for each one cancelled, by id.
        """
        isolation = Value(Isolation.WAITING)
        if not isolate:
            isolation = Case(When(isolation=Isolation.STARTED, then=isolation), default=F("isolation"))
        using = self._write_db()
        with transaction.atomic(using=using):
            # Fenced on no cancel request: one asked meanwhile is left RUNNING, for the next statement.
            ready = self.using(using).filter(cancel_requested_at__isnull=True)
            given_back = ready.update(
                status=JobStatus.READY,
                blocked=blocked_again(),
                worker=None,
                attempts=F("attempts") - 1,
                worker_ids=db.WithoutLastWorker(),
                isolation=isolation,
                # A worker that knew the job had it: an earlier hand-back no longer says why it waits.
                last_error=Case(
                    When(last_error__startswith=HANDED_BACK_PREFIX, then=Value("")),
                    default=F("last_error"),
                    output_field=models.TextField(),
                ),
            )
            if given_back == expected:  # every one went back: none was asked to stop
                return given_back, {}
            return given_back, cancelling.record_cancelled(self.using(using), why, refund=True)

    def release_all(self, worker: str, jobs: list[Job]) -> int:
        """Give unfinished jobs back in one UPDATE (shutdown): READY, attempts refunded.

        Fenced on owner and pickup like every finishing write; return how many went back
        (those asked to stop, recorded cancelled instead, count too: see give_back()).
        """
        given_back, cancelled = self.give_back(worker, jobs)
        return given_back + len(cancelled)

    def give_back(self, worker: str, jobs: list[Job]) -> tuple[int, list[Job]]:
        """release_all(); return how many went READY, and the jobs asked to stop, recorded
        cancelled instead (models/cancelling.py; their copies in `jobs` say so)."""
        if not jobs:
            return 0, []
        fence = Q()
        for job in jobs:
            fence |= Q(pk=job.pk, pickups=job.pickups)
        given_back, cancelled = self.owned_by(worker).filter(fence)._refund(expected=len(jobs))
        for job in jobs:
            if job.pk in cancelled:
                cancelling.mark(job, cancelled[job.pk], refund=True)
        return given_back, [job for job in jobs if job.pk in cancelled]

    def release_unheld(self, worker: str, held: set[str]) -> tuple[int, list[str]]:
        """Give back this worker's RUNNING jobs other than `held`: READY, attempts refunded.

        For a claim that failed on the client yet committed on the server. One asked to
        stop is recorded cancelled instead. Return how many went back READY, and the ids
        of those recorded cancelled.
        """
        given_back, cancelled = self.owned_by(worker).exclude(pk__in=held)._refund()
        return given_back, sorted(cancelled)

    def still_owned(self, worker: str, jobs: list[Job]) -> set[str]:
        """Ids of `jobs` this worker still holds, at the attempt it claimed."""
        fence = Q()
        for job in jobs:
            fence |= Q(pk=job.pk, pickups=job.pickups)
        if not jobs:
            return set()
        owned = self.using(self._write_db()).owned_by(worker).filter(fence)
        return set(owned.values_list("pk", flat=True))

    def finish_successes(self, worker: str, done: list[tuple[Job, Any]]) -> list[Job]:
        """Mark many jobs this worker ran SUCCESSFUL in one UPDATE; return those it still owned.

        Each row is fenced on owner and pickup, as in Job.mark_succeeded(). Jobs of
        workflows are finished with their bookkeeping (models/settling.py), in the same
        transaction as the others.
        """
        if not done:
            return []
        using = self._write_db()
        if any(job.in_workflow for job, _value in done):
            with transaction.atomic(using=using):
                won = self._finish_successes(using, worker, done)
        else:
            won = self._finish_successes(using, worker, done)
        for job, value in done:
            job.status, job.return_value, job.active_key = JobStatus.SUCCESSFUL, value, None
        return [job for job, _value in done if job.pk in won]

    def _finish_successes(self, using: str, worker: str, done: list[tuple[Job, Any]]) -> set:
        plain = [(job, value) for job, value in done if not job.in_workflow]
        won = set()
        if plain:
            won = db.finish_successes(self.model, using, worker, plain, without_dependents=True)
        # A job others started waiting for since its claim fails the plain UPDATE's fence.
        lost = [job.pk for job, _value in plain if job.pk not in won]
        gained = set()
        if lost:
            owned = self.using(using).owned_by(worker).filter(pk__in=lost, has_dependents=True)
            gained = set(owned.values_list("pk", flat=True))
        workflow = [(job, value) for job, value in done if job.in_workflow or job.pk in gained]
        if workflow:  # in the caller's transaction when there is one (no savepoint)
            with transaction.atomic(using=using, savepoint=False):
                won |= self._finish_successes_in_workflow(using, worker, workflow)
        return won

    def _finish_successes_in_workflow(self, using: str, worker: str, done: list[tuple[Job, Any]]) -> set:
        """finish_successes() for jobs in batches or with dependents: with their bookkeeping,
        in the caller's transaction (models/settling.py). Only the rows this write changed
        count: a batch stored again (its commit's answer lost, the outage retried) finds
        none, and counts nothing twice."""
        flags = db.finish_workflow_successes(self.model, using, worker, done)
        missing = [(job, value) for job, value in done if job.pk not in flags]
        if missing:  # stored by an earlier try whose commit's answer was lost: won, not counted again
            finished = self.model._base_manager.using(using).filter(
                pk__in=[job.pk for job, _value in missing], worker=worker, status=JobStatus.SUCCESSFUL
            )
            pickups = dict(finished.values_list("pk", "pickups"))
            replayed = {job.pk for job, _value in missing if pickups.get(job.pk) == job.pickups}
        else:
            replayed = set()
        finals = []
        for job, _value in done:
            if job.pk in flags:
                job.has_dependents = flags[job.pk]
                finals.append(settling.Final(job.pk, job.batch_id, job.has_dependents, succeeded=True))
        settling.settle(self.model, using, finals)
        return set(flags) | replayed
