"""BulkOutcomes: a worker's fenced writes of many jobs it holds: giving them back, finishing successes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.db.models import Case, F, Q, Value, When

from .. import db
from . import cancelling, settling
from .states import HANDED_BACK_PREFIX, Isolation, JobStatus, blocked_again

if TYPE_CHECKING:
    from .job import Job


class BulkOutcomes:
    """JobQuerySet's (models/queryset.py) outcome writes of many jobs, each row fenced on owner and pickup."""

    def _refund(
        self,
        isolate: bool = False,
        why: str = cancelling.RELEASED,
        expected: int | None = None,
        due_in: float | None = None,
        also: dict | None = None,
    ) -> tuple[int, dict[str, list]]:
        """Make these jobs READY with their pickup undone: the attempt and its worker id.

        With `isolate` (their worker died), each must run alone next time; otherwise
        only a job released while it ran alone keeps waiting to. A job asked to stop is
        recorded cancelled instead, uncharged, with `why` (models/cancelling.py). With
        `due_in`, they are due that many seconds from now (a job handing itself back: ResumeLater),
        and `also` holds more changes for the jobs going back READY (its last progress report).
        Return how many went back READY, and the errors stored for each one cancelled, by id.
        """
        isolation = Value(Isolation.WAITING)
        if not isolate:
            isolation = Case(When(isolation=Isolation.STARTED, then=isolation), default=F("isolation"))
        using = self._write_db()
        due = {} if due_in is None else {"run_at": db.seconds_from_now(due_in)}
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
                **due,
                **(also or {}),
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

        Each row is fenced on owner and pickup, as in Job.mark_succeeded(), and keeps its
        job's last progress report if it was not stored yet (db/completions.py). Jobs of
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
            stored = job.pending_progress()  # with its outcome (db/completions.py)
            if stored is not None and job.pk in won:
                job.mark_progress_stored(stored)
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
