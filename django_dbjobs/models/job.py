"""Job: one row per job, from enqueue to its final outcome."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from .. import db
from ..ids import new_id

MIN_PRIORITY = -100
MAX_PRIORITY = 100
#: The order workers claim in: higher priority first, then due time, then age.
CLAIM_ORDER = ("-priority", "run_at", "id")


class JobStatus(models.TextChoices):
    """A job's state; the values are those of django.tasks.TaskResultStatus."""

    READY = "READY", _("Ready")
    RUNNING = "RUNNING", _("Running")
    SUCCESSFUL = "SUCCESSFUL", _("Successful")
    FAILED = "FAILED", _("Failed")


class JobQuerySet(models.QuerySet):
    def ready(self) -> JobQuerySet:
        return self.filter(status=JobStatus.READY)

    def due(self) -> JobQuerySet:
        """Ready jobs whose run_at has come, by the database clock."""
        return self.ready().filter(run_at__lte=Now())

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

    def claim(self, worker: str, limit: int = 1, queues: list[str] | None = None) -> list[Job]:
        """Lock up to `limit` due jobs (of `queues`, or any) for `worker`, mark them running.

        Attempts are counted here, at pickup, so a job that kills its worker every
        time still runs out of attempts. Each attempt's worker is appended to
        worker_ids. One short transaction (or one statement); see db.claim_jobs().
        """
        return db.claim_jobs(self.model, self.db, worker, limit, queues)

    def release_all(self, worker: str, jobs: list[Job]) -> int:
        """Give unfinished jobs back in one UPDATE (shutdown): READY, attempts refunded.

        Fenced on owner and attempt like every finishing write; return how many went back.
        """
        if not jobs:
            return 0
        fence = Q()
        for job in jobs:
            fence |= Q(pk=job.pk, attempts=job.attempts)
        return (
            self.owned_by(worker)
            .filter(fence)
            .update(status=JobStatus.READY, worker=None, attempts=F("attempts") - 1)
        )

    def release_unheld(self, worker: str, held: set[str]) -> int:
        """Give back this worker's RUNNING jobs other than `held`: READY, attempts refunded.

        For a claim that failed on the client yet committed on the server.
        """
        return (
            self.owned_by(worker)
            .exclude(pk__in=held)
            .update(status=JobStatus.READY, worker=None, attempts=F("attempts") - 1)
        )

    def finish_successes(self, worker: str, done: list[tuple[Job, Any]]) -> list[Job]:
        """Mark many jobs this worker ran SUCCESSFUL in one UPDATE; return those it still owned.

        Each row is fenced on owner and attempt, as in Job.mark_succeeded().
        """
        if not done:
            return []
        won = db.finish_successes(self.model, self.db, worker, done)
        for job, value in done:
            job.status, job.return_value, job.active_key = JobStatus.SUCCESSFUL, value, None
        return [job for job, _value in done if job.pk in won]


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

    objects = JobQuerySet.as_manager()

    class Meta:
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        ordering = list(CLAIM_ORDER)
        indexes = [
            db.ReadyJobsIndex(fields=list(CLAIM_ORDER), name="dbjobs_job_claim_idx"),
            models.Index(fields=["status", "worker"], name="dbjobs_job_worker_idx"),
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
    def is_finished(self) -> bool:
        return self.status in (JobStatus.SUCCESSFUL, JobStatus.FAILED)

    def _finish(self, owner: str, **changes: Any) -> bool:
        """Apply `changes` if `owner` still holds this running job; say whether it did."""
        # The attempt number fences too: a worker that lost this job and claimed it
        # again must not finish the new attempt with the old attempt's outcome.
        owned = Job.objects.using(self._state.db).owned_by(owner)
        won = bool(owned.filter(pk=self.pk, attempts=self.attempts).update(**changes))
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
        )

    def mark_for_retry(self, worker: str, error: dict, delay: float) -> bool:
        """Record a failed attempt and make the job due again after `delay` seconds."""
        return self._finish(
            worker,
            status=JobStatus.READY,
            run_at=db.seconds_from_now(delay),
            errors=[*self.errors, error],
            last_error=error["summary"],
        )

    def mark_failed(self, worker: str, error: dict) -> bool:
        """Record the last failed attempt and move the job to the dead letters."""
        return self._finish(
            worker,
            status=JobStatus.FAILED,
            errors=[*self.errors, error],
            last_error=error["summary"],
            finished_at=Now(),
            active_key=None,
        )

    def recover(self, lost_worker: str, error: dict) -> bool:
        """Take a job back from a worker presumed dead (the sweep).

        READY again, or FAILED once its attempts are spent, so a job that kills its
        worker every time ends in the dead letters. Return False if it moved on.
        """
        changes = {
            "worker": None,
            "errors": [*self.errors, error],
            "last_error": error["summary"],
        }
        if self.attempts >= self.max_attempts:
            changes.update(status=JobStatus.FAILED, finished_at=Now(), active_key=None)
        else:
            changes.update(status=JobStatus.READY)
        return self._finish(lost_worker, **changes)

    def release(self, worker: str) -> bool:
        """Give a job back unfinished (shutdown): READY again, its attempt refunded."""
        return self._finish(worker, status=JobStatus.READY, worker=None, attempts=F("attempts") - 1)
