"""Job: one row per job, from enqueue to its final outcome."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Case, F, Q, When
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from .. import db
from .ids import new_id
from .queryset import JobQuerySet
from .states import CLAIM_ORDER, MAX_PRIORITY, MIN_PRIORITY, Blocked, Isolation, JobStatus, blocked_again

__all__ = [
    "CLAIM_ORDER",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "Blocked",
    "Isolation",
    "Job",
    "JobQuerySet",
    "JobStatus",
]

#: Longest concurrency key, and the highest concurrency limit.
MAX_CONCURRENCY_KEY = 200
MAX_CONCURRENCY_LIMIT = 1000


class Job(models.Model):
    """A job to run, running, or finished; FAILED jobs are the dead letters."""

    id = models.CharField(_("id"), max_length=36, primary_key=True, default=new_id, editable=False)
    name = models.CharField(_("job"), max_length=255, help_text=_("Registered name of the job."))
    args = models.JSONField(_("positional arguments"), default=list, blank=True)
    kwargs = models.JSONField(_("keyword arguments"), default=dict, blank=True)
    queue = models.CharField(_("queue"), max_length=100, default="default")
    priority = models.SmallIntegerField(_("priority"), default=0)
    status = models.CharField(_("status"), max_length=10, choices=JobStatus.choices, default=JobStatus.READY)
    run_at = models.DateTimeField(_("run at"), db_default=Now())
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    # Counted at every claim and never given back: the fencing token of one pickup, so
    # the outcome of a pickup that was given back can never finish a later one.
    pickups = models.PositiveIntegerField(_("pickups"), default=0, db_default=0, editable=False)
    max_attempts = models.PositiveIntegerField(_("max attempts"), default=3)
    worker = models.CharField(
        _("worker"),
        max_length=64,
        null=True,
        blank=True,
        help_text=_("The worker process that holds (or last held) the job."),
    )
    worker_ids = models.JSONField(_("worker of each attempt"), default=list, blank=True)
    enqueued_at = models.DateTimeField(_("enqueued at"), db_default=Now())
    started_at = models.DateTimeField(_("first started at"), null=True, blank=True)
    last_attempted_at = models.DateTimeField(_("last attempted at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    return_value = models.JSONField(_("return value"), null=True, blank=True)
    errors = models.JSONField(_("errors"), default=list, blank=True)
    last_error = models.TextField(_("last error"), blank=True, default="")
    unique_key = models.CharField(
        _("unique key"),
        max_length=200,
        null=True,
        blank=True,
        help_text=_("At most one ready or running job per job name and key."),
    )
    # unique_key while the job is READY or RUNNING, NULL once it finishes: a plain
    # unique constraint then means "one active job per key" on every database,
    # MySQL included, which has no partial unique indexes.
    active_key = models.CharField(
        _("active unique key"), max_length=200, null=True, blank=True, editable=False
    )
    isolation = models.CharField(
        _("isolation"),
        max_length=8,
        choices=Isolation.choices,
        default=Isolation.NONE,
        db_default=Isolation.NONE,
        blank=True,
        editable=False,
        help_text=_("Held by a worker that died: runs alone until it finishes, so a crash is pinned on it."),
    )

    scheduled_for = models.DateTimeField(
        _("scheduled for"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("The due time of the schedule that enqueued this job; empty for other jobs."),
    )

    context = models.JSONField(
        _("enqueuer's context"),
        null=True,
        blank=True,
        default=None,
        editable=False,
        help_text=_(
            "Language, timezone and DBJOBS_CONTEXT_CAPTURE's data of the code that enqueued the job; "
            "restored while it runs."
        ),
    )

    concurrency_key = models.CharField(
        _("concurrency key"),
        max_length=MAX_CONCURRENCY_KEY,
        null=True,
        blank=True,
        editable=False,
        help_text=_("At most concurrency limit jobs with this key run at once."),
    )
    concurrency_limit = models.PositiveSmallIntegerField(
        _("concurrency limit"), null=True, blank=True, editable=False
    )
    blocked = models.CharField(
        _("blocked"),
        max_length=12,
        choices=Blocked.choices,
        default=Blocked.NONE,
        db_default=Blocked.NONE,
        blank=True,
        editable=False,
        help_text=_("Why a ready job is not claimed yet."),
    )
    cancel_requested_at = models.DateTimeField(
        _("cancel requested at"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("Set when a running job is asked to stop; its worker interrupts it."),
    )

    objects = JobQuerySet.as_manager()

    class Meta:
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        ordering = list(CLAIM_ORDER)
        indexes = [
            db.ReadyJobsIndex(fields=list(CLAIM_ORDER), name="dbjobs_job_claimable_idx"),
            db.RunningJobsIndex(fields=["worker"], name="dbjobs_job_running_idx"),
            db.FinishedJobsIndex(fields=["status", "finished_at", "id"], name="dbjobs_job_finished_idx"),
            db.FailedJobsIndex(fields=["queue", "finished_at", "id"], name="dbjobs_job_failed_queue_idx"),
            db.UniqueKeyIndex(fields=["unique_key"], name="dbjobs_job_unique_key_idx"),
            db.RatedJobsIndex(fields=["queue", *CLAIM_ORDER], name="dbjobs_job_rated_idx"),
            db.KeyedJobsIndex(
                fields=["status", "blocked", "concurrency_key", *CLAIM_ORDER], name="dbjobs_job_keyed_idx"
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["name", "active_key"], name="dbjobs_job_one_active_per_key"),
            models.CheckConstraint(
                condition=Q(priority__gte=MIN_PRIORITY, priority__lte=MAX_PRIORITY),
                name="dbjobs_job_priority_range",
            ),
            models.CheckConstraint(condition=Q(status__in=JobStatus.values), name="dbjobs_job_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def cancel_requested(self) -> bool:
        """Whether this job was asked to stop: ``current_job().cancel_requested`` in a running job.

        A running job learns of it within about a second (its worker checks); a job that
        prefers to stop by itself (``@job(interruptible=False)``) reads this and raises
        JobCancelled, or returns.
        """
        return self.cancel_requested_at is not None or self.__dict__.get("_cancel_requested", False)

    def request_cancel(self) -> None:
        """Tell this running job, in its worker's memory, that its cancellation was requested."""
        self._cancel_requested = True

    @property
    def is_finished(self) -> bool:
        return self.status in (JobStatus.SUCCESSFUL, JobStatus.FAILED)

    def _finish(self, owner: str, **changes: Any) -> bool:
        """Apply `changes` if `owner` still holds this running job; say whether it did."""
        # The pickup fences too: a worker that lost this job and claimed it again
        # must not finish the new pickup with the old one's outcome.
        owned = Job.objects.using(self._state.db).owned_by(owner)
        won = bool(owned.filter(pk=self.pk, pickups=self.pickups).update(**changes))
        if won:
            for field, value in changes.items():
                if not hasattr(value, "resolve_expression"):
                    setattr(self, field, value)
        return won

    def mark_succeeded(self, worker: str, return_value: Any) -> bool:
        """Record success. Return False if the lease was lost."""
        return self._finish(
            worker,
            status=JobStatus.SUCCESSFUL,
            return_value=return_value,
            finished_at=Now(),
            active_key=None,
            isolation=Isolation.NONE,
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
        expired = Job.objects.using(self._state.db).filter(
            pk=self.pk, enqueued_at__lt=db.seconds_from_now(-grace)
        )
        if expired.exists() and self.mark_failed(worker, error):
            return JobStatus.FAILED
        owned = Job.objects.using(self._state.db).owned_by(worker).filter(pk=self.pk, pickups=self.pickups)
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
        owned = Job.objects.using(self._state.db).owned_by(lost_worker)
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
                status=JobStatus.FAILED, finished_at=Now(), active_key=None, isolation=Isolation.NONE
            )
        else:
            changes.update(status=JobStatus.READY, isolation=Isolation.WAITING, blocked=blocked_again())
        if not mine.update(**changes):
            return False
        for field, value in changes.items():
            if not hasattr(value, "resolve_expression"):
                setattr(self, field, value)
        return True

    def release(self, worker: str) -> bool:
        """Give a job back unfinished (shutdown): READY again, its pickup undone."""
        owned = Job.objects.using(self._state.db).owned_by(worker)
        return bool(owned.filter(pk=self.pk, pickups=self.pickups)._refund())
