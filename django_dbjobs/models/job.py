"""Job: one row per job, from enqueue to its final outcome."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Case, F, Q, Value, When
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


class Isolation(models.TextChoices):
    """Whether a job must run alone, so that a crash during its run can be pinned on it.

    A worker's successes and prefetched jobs are not written down one by one as they
    start (that would cost a write per job), so when a worker dies nobody knows which
    of its RUNNING jobs had started. They all go back uncharged, WAITING; a worker runs
    at most one WAITING job at a time, writes STARTED before calling it, and stores its
    outcome at once. A worker that dies then has at most one STARTED job: the one its
    death is charged to.
    """

    NONE = "", _("No")
    WAITING = "WAITING", _("Waiting to run alone")
    STARTED = "STARTED", _("Running alone")


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

    def isolated(self) -> JobQuerySet:
        """Jobs that must run alone: recovered from a worker that died (see Isolation)."""
        return self.exclude(isolation=Isolation.NONE)

    def claim(
        self, worker: str, limit: int = 1, queues: list[str] | None = None, isolated: bool = True
    ) -> list[Job]:
        """Lock up to `limit` due jobs (of `queues`, or any) for `worker`, mark them running.

        Attempts are counted here, at pickup, so a job that kills its worker every
        time still runs out of attempts. Each attempt's worker is appended to
        worker_ids. With ``isolated=False``, jobs waiting to run alone are left for
        another claim. One short transaction (or one statement); see db.claim_jobs().
        """
        return db.claim_jobs(self.model, self.db, *self._claim_shape(queues, isolated), worker, limit)

    def claim_sql(
        self, worker: str, limit: int = 1, queues: list[str] | None = None, isolated: bool = True
    ) -> tuple[str, list]:
        """The SQL claim() runs first, with its parameters (to EXPLAIN it)."""
        return db.claim_sql(self.model, self.db, *self._claim_shape(queues, isolated), worker, limit)

    def _claim_shape(self, queues: list[str] | None, isolated: bool):
        # Built with placeholders, compiled once per shape; the real names replace them.
        names = [f"\x00queue{n}" for n in range(len(queues or []))]

        def build() -> JobQuerySet:
            picked = self.due().for_queues(names)
            return picked if isolated else picked.filter(isolation=Isolation.NONE)

        return build, (len(names), isolated), dict(zip(names, queues or [], strict=True))

    def _refund(self, isolate: bool = False) -> int:
        """Make these jobs READY with their pickup undone: the attempt and its worker id.

        With `isolate` (their worker died), each must run alone next time; otherwise
        only a job released while it ran alone keeps waiting to.
        """
        isolation = Value(Isolation.WAITING)
        if not isolate:
            isolation = Case(When(isolation=Isolation.STARTED, then=isolation), default=F("isolation"))
        return self.update(
            status=JobStatus.READY,
            worker=None,
            attempts=F("attempts") - 1,
            worker_ids=db.WithoutLastWorker(),
            isolation=isolation,
        )

    def release_all(self, worker: str, jobs: list[Job]) -> int:
        """Give unfinished jobs back in one UPDATE (shutdown): READY, attempts refunded.

        Fenced on owner and pickup like every finishing write; return how many went back.
        """
        if not jobs:
            return 0
        fence = Q()
        for job in jobs:
            fence |= Q(pk=job.pk, pickups=job.pickups)
        return self.owned_by(worker).filter(fence)._refund()

    def release_unheld(self, worker: str, held: set[str]) -> int:
        """Give back this worker's RUNNING jobs other than `held`: READY, attempts refunded.

        For a claim that failed on the client yet committed on the server.
        """
        return self.owned_by(worker).exclude(pk__in=held)._refund()

    def still_owned(self, worker: str, jobs: list[Job]) -> set[str]:
        """Ids of `jobs` this worker still holds, at the attempt it claimed."""
        fence = Q()
        for job in jobs:
            fence |= Q(pk=job.pk, pickups=job.pickups)
        if not jobs:
            return set()
        return set(self.owned_by(worker).filter(fence).values_list("pk", flat=True))

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
            run_at=db.seconds_from_now(delay),
            errors=[*self.errors, error],
            last_error=error["summary"],
            isolation=Isolation.NONE,
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
            isolation=Isolation.NONE,
        )

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
            changes.update(status=JobStatus.READY, isolation=Isolation.WAITING)
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
