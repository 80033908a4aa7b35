"""JobOutcomes: the state changes of one job, each one UPDATE fenced on its owner and pickup."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Case, F, When
from django.db.models.functions import Now

from .. import db
from . import settling
from .states import Isolation, JobStatus, blocked_again, done_if_keyed

FINAL = (JobStatus.SUCCESSFUL, JobStatus.FAILED)


class JobOutcomes:
    """The outcome writes of Job (models/job.py): finishing, retrying, giving back, recovering."""

    def _jobs(self):
        """Every job (not a proxy's narrower manager: FailedJob's sees only dead letters)."""
        return self._meta.concrete_model._default_manager.using(self._state.db)

    def _finish(self, owner: str, **changes: Any) -> bool:
        """Apply `changes` if `owner` still holds this running job; say whether it did."""
        # The pickup fences too: a worker that lost this job and claimed it again
        # must not finish the new pickup with the old one's outcome.
        owned = self._jobs().owned_by(owner).filter(pk=self.pk, pickups=self.pickups)
        won = self._write(owned, changes) or self._stored_before(owner, changes)
        if won:
            for field, value in changes.items():
                if not hasattr(value, "resolve_expression"):
                    setattr(self, field, value)
        return won

    def _stored_before(self, owner: str, changes: dict[str, Any]) -> bool:
        """Whether an earlier try of this outcome write committed while its answer was lost.

        db/outage.py tries such a write again, and the new try fails the fence: without this
        the worker would drop an outcome that is stored, and never send its signals. A failed
        attempt's record (its worker, attempt and time) is written by this write alone: found
        among the row's errors, it was stored, whatever moved the row since. A success is this
        write's if the row is SUCCESSFUL under `owner` at this pickup: a sweep clears the
        worker, and a new claim counts the pickups up.
        """
        status = changes.get("status")
        if status not in (*FINAL, JobStatus.READY):
            return False
        row = self._jobs().filter(pk=self.pk).values("status", "worker", "pickups", "errors").first()
        if row is None:  # deleted since: nothing to tell
            return False
        if "errors" in changes:
            stored = {_attempt_of(error) for error in row["errors"] or [] if isinstance(error, dict)}
            return _attempt_of(changes["errors"][-1]) in stored
        return (row["status"], row["worker"], row["pickups"]) == (status, owner, self.pickups)

    def _write(self, fenced, changes: dict[str, Any]) -> bool:
        """UPDATE this job's `fenced` row with `changes`; settle its workflow if they are final.

        A job in a batch, or one others wait for, is finished in a transaction with its
        workflow's bookkeeping (models/settling.py). Any other job is finished with its one
        UPDATE, fenced on ``has_dependents = FALSE``: a job others started waiting for
        since its claim (``enqueue(after=...)``) fails that fence, and goes the first way.
        """
        if changes.get("status") not in FINAL:
            return bool(fenced.update(**changes))
        if not self.in_workflow:
            if fenced.filter(has_dependents=False).update(**changes):
                return True
            if not fenced.filter(has_dependents=True).exists():
                return False
        using = self._state.db or "default"
        with transaction.atomic(using=using):
            if not fenced.update(**changes):
                return False
            # Read under the row's lock: enqueue(after=...) sets it under the same lock.
            row = fenced.model._base_manager.using(using).filter(pk=self.pk)
            self.has_dependents = row.values_list("has_dependents", flat=True).get()
            succeeded = changes["status"] == JobStatus.SUCCESSFUL
            final = settling.Final(self.pk, self.batch_id, self.has_dependents, succeeded)
            settling.settle(type(self)._meta.concrete_model, using, [final])
        return True

    def mark_succeeded(self, worker: str, return_value: Any) -> bool:
        """Record success. Return False if the lease was lost."""
        return self._finish(
            worker,
            status=JobStatus.SUCCESSFUL,
            return_value=return_value,
            finished_at=Now(),
            active_key=None,
            isolation=Isolation.NONE,
            blocked=done_if_keyed(),
        )

    def mark_for_retry(self, worker: str, error: dict, delay: float) -> bool:
        """Record a failed attempt and make the job due again after `delay` seconds."""
        return self._finish(
            worker,
            status=JobStatus.READY,
            # A job asked to stop meanwhile is due at once: its next claim records it cancelled.
            run_at=Case(
                When(cancel_requested_at__isnull=False, then=Now()), default=db.seconds_from_now(delay)
            ),
            errors=[*self.errors, error],
            last_error=error["summary"],
            isolation=Isolation.NONE,
            blocked=blocked_again(),
        )

    def mark_failed(self, worker: str, error: dict, unstarted: bool = False) -> bool:
        """Record the last failed attempt and move the job to the dead letters.

        With `unstarted` (cancelled before it started) its pickup is not charged: the
        attempt and its worker id are taken back.
        """
        refund = {"attempts": F("attempts") - 1, "worker_ids": db.WithoutLastWorker()} if unstarted else {}
        won = self._finish(
            worker,
            status=JobStatus.FAILED,
            errors=[*self.errors, error],
            last_error=error["summary"],
            finished_at=Now(),
            active_key=None,
            isolation=Isolation.NONE,
            blocked=done_if_keyed(),
            **refund,
        )
        if won and unstarted:
            self.attempts, self.worker_ids = self.attempts - 1, self.worker_ids[:-1]
        return won

    def mark_started_alone(self, worker: str) -> bool:
        """Record that this job, waiting to run alone, starts now. Return False if the lease was lost."""
        return self._finish(worker, isolation=Isolation.STARTED)

    def mark_unknown(self, worker: str, error: dict, delay: float, grace: float) -> str | None:
        """Hand back a job this worker does not know, for a worker that does.

        READY again in `delay` seconds with the pickup undone; FAILED once `grace`
        seconds have passed since it was enqueued (by the database clock). Return the
        status written, or None if the lease was lost.
        """
        expired = self._jobs().filter(pk=self.pk, enqueued_at__lt=db.seconds_from_now(-grace))
        if expired.exists() and self.mark_failed(worker, error):
            return JobStatus.FAILED
        owned = self._jobs().owned_by(worker).filter(pk=self.pk, pickups=self.pickups)
        if owned.update(
            status=JobStatus.READY,
            worker=None,
            attempts=F("attempts") - 1,
            worker_ids=db.WithoutLastWorker(),
            run_at=db.seconds_from_now(delay),
            last_error=error["summary"],
            blocked=blocked_again(),
        ):
            return JobStatus.READY
        return None

    def recover(self, lost_worker: str, error: dict) -> bool:
        """Take a job back from a worker presumed dead (the sweep); return False if it moved on.

        A job that was running alone (Isolation.STARTED) is charged the attempt: READY
        again, or FAILED once its attempts are spent, so a job that kills its worker
        every time ends in the dead letters. Any other job of the dead worker may never
        have started, or may have succeeded unacknowledged: its pickup is undone and it
        waits to run alone (Isolation.WAITING), uncharged.
        """
        owned = self._jobs().owned_by(lost_worker)
        mine = owned.filter(pk=self.pk, pickups=self.pickups, isolation=self.isolation)
        if self.isolation != Isolation.STARTED:
            if not mine._refund(isolate=True):
                return False
            self.status, self.worker, self.attempts = JobStatus.READY, None, self.attempts - 1
            self.worker_ids = self.worker_ids[:-1]
            self.isolation = Isolation.WAITING
            return True
        changes = {
            "worker": None,
            "errors": [*self.errors, error],
            "last_error": error["summary"],
        }
        if self.attempts >= self.max_attempts:
            changes.update(
                status=JobStatus.FAILED,
                finished_at=Now(),
                active_key=None,
                isolation=Isolation.NONE,
                blocked=done_if_keyed(),
            )
        else:
            changes.update(status=JobStatus.READY, isolation=Isolation.WAITING, blocked=blocked_again())
        if not self._write(mine, changes):
            return False
        for field, value in changes.items():
            if not hasattr(value, "resolve_expression"):
                setattr(self, field, value)
        return True

    def release(self, worker: str) -> bool:
        """Give a job back unfinished (shutdown): READY again, its pickup undone."""
        owned = self._jobs().owned_by(worker)
        return bool(owned.filter(pk=self.pk, pickups=self.pickups)._refund())


def _attempt_of(error: dict) -> tuple:
    """What tells one failed attempt's record from any other: its worker, attempt and time."""
    return (error.get("worker"), error.get("attempt"), error.get("at"))
