"""Job: one row per job, from enqueue to its final outcome."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from .. import db
from .ids import new_id
from .job_outcomes import JobOutcomes
from .long_work import LongWork, ProgressHandle
from .queryset import JobQuerySet
from .states import CLAIM_ORDER, MAX_PRIORITY, MIN_PRIORITY, Blocked, Isolation, JobStatus

__all__ = [
    "CLAIM_ORDER",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "Blocked",
    "Isolation",
    "Job",
    "JobQuerySet",
    "JobStatus",
    "ProgressHandle",
]

#: Longest concurrency key, and the highest concurrency limit.
MAX_CONCURRENCY_KEY = 200
MAX_CONCURRENCY_LIMIT = 1000


class Job(JobOutcomes, LongWork, models.Model):
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

    trace_context = models.JSONField(
        _("trace context"),
        null=True,
        blank=True,
        default=None,
        editable=False,
        help_text=_(
            "The trace context (W3C traceparent) of the code that enqueued the job, when tracing "
            "is on; its run continues that trace."
        ),
    )
    error_fingerprint = models.CharField(
        _("failure cause"),
        max_length=16,
        null=True,
        blank=True,
        editable=False,
        help_text=_(
            "Groups dead letters of one cause: the exception's class, its message with numbers and "
            "ids masked, and the innermost frame of the job's own code."
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

    batch = models.ForeignKey(
        "Batch",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # BatchJobsIndex: jobs outside batches are left out of it
        null=True,
        blank=True,
        editable=False,
        related_name="jobs",
        verbose_name=_("batch"),
    )
    waiting_for = models.PositiveIntegerField(
        _("waiting for"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("How many of the jobs this one waits for have not finished yet."),
    )
    has_dependents = models.BooleanField(
        _("has dependents"),
        default=False,
        db_default=False,
        editable=False,
        help_text=_("Other jobs wait for this one."),
    )

    progress_state = models.JSONField(
        _("progress"),
        null=True,
        blank=True,
        default=None,
        editable=False,
        help_text=_(
            "What the job last reported with current_job().progress(): done, total, note, rate; "
            "kept after it ends."
        ),
    )
    checkpoint_state = models.JSONField(
        _("checkpoint"),
        null=True,
        blank=True,
        default=None,
        editable=False,
        help_text=_(
            "The state the job last stored with current_job().checkpoint(); a later run of it "
            "carries on from there (current_job().resume)."
        ),
    )

    objects = JobQuerySet.as_manager()

    class Meta:
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        ordering = list(CLAIM_ORDER)
        indexes = [
            db.ReadyJobsIndex(fields=list(CLAIM_ORDER), name="dbjobs_job_claimable_idx"),
            db.RunningJobsIndex(fields=["worker"], name="dbjobs_job_running_idx"),
            db.ActiveJobsIndex(fields=["status", "queue", "blocked", "run_at"], name="dbjobs_job_active_idx"),
            db.FinishedJobsIndex(fields=["status", "finished_at", "id"], name="dbjobs_job_finished_idx"),
            db.FailedJobsIndex(fields=["queue", "finished_at", "id"], name="dbjobs_job_failed_queue_idx"),
            db.FailedJobsIndex(
                fields=["error_fingerprint", "finished_at", "id"], name="dbjobs_job_failed_cause_idx"
            ),
            db.UniqueKeyIndex(fields=["unique_key"], name="dbjobs_job_unique_key_idx"),
            db.RatedJobsIndex(fields=["queue", *CLAIM_ORDER], name="dbjobs_job_rated_idx"),
            db.KeyedJobsIndex(
                fields=["status", "blocked", "concurrency_key", *CLAIM_ORDER], name="dbjobs_job_keyed_idx"
            ),
            db.BatchJobsIndex(fields=["batch", "status"], name="dbjobs_job_batch_idx"),
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
    def in_workflow(self) -> bool:
        """Whether this job's final outcome counts for a batch or releases other jobs."""
        return self.batch_id is not None or self.has_dependents

    @property
    def is_finished(self) -> bool:
        return self.status in (JobStatus.SUCCESSFUL, JobStatus.FAILED)
