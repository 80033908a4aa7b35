"""JobOutcomes: the state changes of one job, each one UPDATE fenced on its owner and pickup."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from .. import db
from ..observability.fingerprints import fingerprint
from . import cancelling, settling
from .states import Isolation, JobStatus, blocked_again, done_if_keyed

FINAL = (JobStatus.SUCCESSFUL, JobStatus.FAILED)


class JobOutcomes:
    """The outcome writes of Job (models/job.py): finishing, retrying, giving back, recovering."""

    def _jobs(self):
        """Every job (not a proxy's narrower manager: FailedJob's sees only dead letters)."""
        return self._meta.concrete_model._default_manager.using(self._state.db)

    def _finish(self, owner: str, fence: Q | None = None, **changes: Any) -> bool:
        """Apply `changes` if `owner` still holds this running job (and `fence` holds); say whether it did."""
        # The pickup fences too: a worker that lost this job and claimed it again
        # must not finish the new pickup with the old one's outcome.
        owned = self._owned(owner)
        if not self._write(owned.filter(fence or Q()), changes):
            row = self._stored_before(owner, changes)
            if row is None:
                return False
            if _became_a_cancel(row, changes):  # models/cancelling.py: this copy says what was stored
                cancelling.mark(self, row["errors"], refund=False)
                return True
        for field, value in changes.items():
            if not hasattr(value, "resolve_expression"):
                setattr(self, field, value)
        return True

    def _owned(self, owner: str):
        """This job's row if `owner` still holds it, at this pickup: the fence of every outcome write."""
        return self._jobs().owned_by(owner).filter(pk=self.pk, pickups=self.pickups)

    def _cancelled_instead(self, owned, summary: str, refund: bool, before: tuple[dict, ...] = ()) -> bool:
        """Record this job cancelled if it is `owned` and was asked to stop (models/cancelling.py)."""
        stored = cancelling.record_cancelled(owned, summary, refund, before)
        if self.pk in stored:
            cancelling.mark(self, stored[self.pk], refund)
        return self.pk in stored

    def _stored_before(self, owner: str, changes: dict[str, Any]) -> dict | None:
        """The row, if an earlier try of this outcome write committed while its answer was lost.

        db/outage.py tries such a write again, and the new try fails the fence: without this
        the worker would drop an outcome that is stored, and never send its signals. A failed
        attempt's record (its worker, attempt and time) is written by this write alone (or by
        the cancel it became: _became_a_cancel()): found among the row's errors, it was
        stored, whatever moved the row since. A success is this write's if the row is
        SUCCESSFUL under `owner` at this pickup: a sweep clears the worker, and a new claim
        counts the pickups up.
        """
        status = changes.get("status")
        if status not in (*FINAL, JobStatus.READY):
            return None
        row = self._jobs().filter(pk=self.pk).values("status", "worker", "pickups", "errors").first()
        if row is None:  # deleted since: nothing to tell
            return None
        if "errors" in changes:
            stored = {_attempt_of(error) for error in row["errors"] or [] if isinstance(error, dict)}
            return row if _attempt_of(changes["errors"][-1]) in stored else None
        return (
            row if (row["status"], row["worker"], row["pickups"]) == (status, owner, self.pickups) else None
        )

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
            **self.final_progress(),
        )

    def mark_for_retry(self, worker: str, error: dict, delay: float) -> bool:
        """Record a failed attempt and make the job due again after `delay` seconds.

        A job asked to stop is not retried: it is recorded cancelled after this attempt's
        error (``status`` says FAILED), since READY it would only be claimed to be.
        """
        if self._finish(
            worker,
            fence=Q(cancel_requested_at__isnull=True),
            status=JobStatus.READY,
            run_at=db.seconds_from_now(delay),
            errors=[*self.errors, error],
            last_error=error["summary"],
            isolation=Isolation.NONE,
            blocked=blocked_again(),
            **self.final_progress(),
        ):
            return True
        return self._cancelled_instead(self._owned(worker), cancelling.RETRY, refund=False, before=(error,))

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
            error_fingerprint=fingerprint(error),
            finished_at=Now(),
            active_key=None,
            isolation=Isolation.NONE,
            blocked=done_if_keyed(),
            **refund,
            **self.final_progress(),
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
        owned = self._owned(worker)
        if owned.filter(cancel_requested_at__isnull=True).update(
            status=JobStatus.READY,
            worker=None,
            attempts=F("attempts") - 1,
            worker_ids=db.WithoutLastWorker(),
            run_at=db.seconds_from_now(delay),
            last_error=error["summary"],
            blocked=blocked_again(),
        ):
            return JobStatus.READY
        if self._cancelled_instead(owned, cancelling.UNSTARTED, refund=True):  # asked to stop: never started
            return JobStatus.FAILED
        return None

    def recover(self, lost_worker: str, error: dict) -> bool:
        """Take a job back from a worker presumed dead (the sweep); return False if it moved on.

        A job that was running alone (Isolation.STARTED) is charged the attempt: READY
        again, or FAILED once its attempts are spent, so a job that kills its worker
        every time ends in the dead letters. Any other job of the dead worker may never
        have started, or may have succeeded unacknowledged: its pickup is undone and it
        waits to run alone (Isolation.WAITING), uncharged. A job asked to stop is recorded
        cancelled instead (``status`` says FAILED), charged only if it was running alone.
        """
        mine = self._owned(lost_worker).filter(isolation=self.isolation)
        why = cancelling.worker_lost(lost_worker)
        if self.isolation != Isolation.STARTED:
            given_back, cancelled = mine._refund(isolate=True, why=why)
            if self.pk in cancelled:
                cancelling.mark(self, cancelled[self.pk], refund=True)
                return True
            if not given_back:
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
        fenced = mine
        if self.attempts >= self.max_attempts:
            changes.update(
                status=JobStatus.FAILED,
                error_fingerprint=fingerprint(error),
                finished_at=Now(),
                active_key=None,
                isolation=Isolation.NONE,
                blocked=done_if_keyed(),
            )
        else:
            changes.update(status=JobStatus.READY, isolation=Isolation.WAITING, blocked=blocked_again())
            fenced = mine.filter(cancel_requested_at__isnull=True)  # one asked to stop: cancelled below
        if not self._write(fenced, changes):
            ready = changes["status"] == JobStatus.READY
            return ready and self._cancelled_instead(mine, why, refund=False, before=(error,))
        for field, value in changes.items():
            if not hasattr(value, "resolve_expression"):
                setattr(self, field, value)
        return True

    def release(self, worker: str) -> bool:
        """Give a job back unfinished (shutdown): READY again, its pickup undone; one asked to
        stop is recorded cancelled instead (``status`` says FAILED)."""
        given_back, cancelled = self._owned(worker)._refund()
        if self.pk in cancelled:
            cancelling.mark(self, cancelled[self.pk], refund=True)
        return bool(given_back or cancelled)


def _became_a_cancel(row: dict, changes: dict[str, Any]) -> bool:
    """Whether the retry `changes` describe was stored as a cancel (mark_for_retry(): asked to
    stop), its attempt's record followed by the cancel's."""
    errors = row["errors"] or []
    return (
        changes.get("status") == JobStatus.READY
        and row["status"] == JobStatus.FAILED
        and len(errors) >= 2
        and _attempt_of(errors[-2]) == _attempt_of(changes["errors"][-1])
        and errors[-1].get("summary") == cancelling.RETRY
    )


def _attempt_of(error: dict) -> tuple:
    """What tells one failed attempt's record from any other: its worker, attempt and time."""
    return (error.get("worker"), error.get("attempt"), error.get("at"))
