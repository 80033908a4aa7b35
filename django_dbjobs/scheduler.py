"""The scheduler: every worker fires due schedules, and each due time makes exactly one job.

Exactly once, by construction: firing a schedule is one transaction that first moves
the schedule's ``next_due_at`` on, fenced on the value this scheduler read (a
compare-and-set), then records one ScheduleTick per due time run, then inserts the
jobs. A racing scheduler waits on the row lock (PostgreSQL, MySQL/MariaDB) or the
write lock (SQLite, BEGIN IMMEDIATE), then matches no row and writes nothing. The
ticks' unique constraint on (schedule, due time) refuses a second job for a due time
even if the fence were ever bypassed. A scheduler killed mid-transaction commits
nothing, so the due time is still due for the next one.

Idle cost: one indexed query per DBJOBS_SCHEDULE_CHECK_INTERVAL, or at the next due
time if sooner; a schedule saved in this process (or, on PostgreSQL, in any process)
wakes the scheduler at once.
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import Any

from django.db import DatabaseError, IntegrityError, InterfaceError, transaction
from django.db.models.functions import Now
from django.utils import timezone

from . import cron, db, enqueuing, rows, schedules, wakeup
from .conf import settings
from .exceptions import InvalidJob, InvalidSchedule, UnknownJob
from .models import Job, Schedule, ScheduleTick
from .outage import close_broken_connections
from .signals import schedule_fired, send

logger = logging.getLogger("django_dbjobs")

#: Schedules read per check; more due at once are fired on the next pass, at once.
BATCH = 100
#: Ticks older than this are deleted (hourly, by each scheduler); the schedule's own
#: next_due_at already keeps a due time from firing twice once it has passed.
TICK_RETENTION = datetime.timedelta(days=7)
PRUNE_INTERVAL = 3600.0
#: Pause after a database error before the next check.
ERROR_PAUSE = 1.0


class Scheduler:
    """Fire due schedules from a worker's loop: call fire_if_due() often; it queries only when due."""

    def __init__(self, worker_id: str, using: str = "default"):
        self.worker_id = worker_id
        self.using = using
        self._next_check = 0.0
        self._generation = wakeup.schedule_generation()
        self._next_prune = time.monotonic() + 60.0
        self._unknown_until: dict[int, float] = {}  # schedules whose job this process lacks

    def sync_settings(self) -> None:
        schedules.sync_settings(self.using)

    def due_in(self) -> float:
        """Seconds until fire_if_due() has work to do."""
        if wakeup.schedule_generation() != self._generation:
            return 0.0
        return max(self._next_check - time.monotonic(), 0.0)

    def fire_if_due(self) -> None:
        if self.due_in() > 0:
            return
        self._generation = wakeup.schedule_generation()
        now = time.monotonic()
        try:
            self._next_check = now + self.fire_due()
        except (DatabaseError, InterfaceError) as exc:
            logger.warning("Database error while firing schedules: %s", exc)
            close_broken_connections()
            self._next_check = now + ERROR_PAUSE
        except Exception:  # noqa: BLE001 - the scheduler must never stop the worker
            logger.exception("Unexpected error while firing schedules")
            self._next_check = now + ERROR_PAUSE
        if now >= self._next_prune:
            self._next_prune = now + PRUNE_INTERVAL
            self._prune_ticks()

    def fire_due(self) -> float:
        """Fire every schedule due by the database clock; return seconds until the next check."""
        interval = float(settings.SCHEDULE_CHECK_INTERVAL)
        wait = interval
        rows_read = list(
            Schedule.objects.using(self.using).due_within(interval).annotate(db_now=Now())[:BATCH]
        )
        for schedule in rows_read:
            if schedule.next_due_at > schedule.db_now:
                wait = min(wait, (schedule.next_due_at - schedule.db_now).total_seconds())
                break
            if self._unknown_until.get(schedule.pk, 0) > time.monotonic():
                continue
            try:
                next_due = self.fire(schedule, schedule.db_now)
            except (DatabaseError, InterfaceError) as exc:
                if db.error_kind(exc, self.using) is db.ErrorKind.OUTAGE:
                    raise
                self._broken(schedule, exc)  # a value the database refuses: this schedule alone
                continue
            if next_due is not None:
                wait = min(wait, (next_due - schedule.db_now).total_seconds())
        if len(rows_read) == BATCH:
            wait = 0.0
        return max(wait, 0.0)

    def fire(self, schedule: Schedule, now: datetime.datetime) -> datetime.datetime | None:
        """Fire `schedule`'s due times up to `now` (database clock); return its next due time.

        Returns None when this scheduler wrote nothing (another fired it first, or it is
        broken and was logged).
        """
        try:
            plan = cron.plan(
                schedule.cron_schedule(),
                schedule.next_due_at,
                now,
                schedule.missed_runs,
                datetime.timedelta(seconds=schedule.catch_up_window),
            )
        except InvalidSchedule as exc:
            self._broken(schedule, exc)
            return None
        try:
            jobs = [build_job(schedule, due, self.using) for due in plan.run]
        except UnknownJob as exc:
            # A rolling deploy: this worker does not know the job yet (or any more);
            # leave the due time to a worker that does.
            self._unknown_until[schedule.pk] = time.monotonic() + float(settings.SCHEDULE_CHECK_INTERVAL)
            logger.warning("Schedule left to another worker name=%s: %s", schedule.name, exc)
            return None
        except InvalidJob as exc:
            self._broken(schedule, exc)
            return None
        skip: set[datetime.datetime] = set()
        for _ in range(2):
            try:
                fired = self._commit(schedule, plan, jobs, skip)
                break
            except IntegrityError:
                # A tick already exists for one of these due times: never run it again.
                ticks = ScheduleTick.objects.using(self.using).filter(schedule=schedule, due_at__in=plan.run)
                skip = set(ticks.values_list("due_at", flat=True))
        else:
            return None
        if fired is None:
            return None
        if plan.missed:
            logger.warning(
                "Schedule missed due times name=%s missed=%s%s policy=%s ran=%s",
                schedule.name,
                plan.missed,
                "+" if plan.more_missed else "",
                schedule.missed_runs,
                len(plan.run),
            )
        for job, due in fired:
            logger.info("Schedule fired name=%s due=%s job=%s", schedule.name, due.isoformat(), job.pk)
        if fired:
            send(
                schedule_fired,
                sender=Schedule,
                schedule=schedule,
                jobs=[job for job, _ in fired],
                due_times=[due for _, due in fired],
                manual=False,
            )
        return plan.next_due

    def _commit(self, schedule, plan: cron.Plan, jobs, skip) -> list[tuple[Job, datetime.datetime]] | None:
        """The firing transaction; return the (job, due time) pairs written, None if another fired first."""
        run = [(due, built) for due, built in zip(plan.run, jobs, strict=True) if due not in skip]
        with transaction.atomic(using=self.using):
            changes: dict[str, Any] = {"next_due_at": plan.next_due, "last_error": ""}
            if run:
                changes.update(last_due_at=run[-1][0], last_job_id=run[-1][1][0].pk, last_fired_at=Now())
            won = (
                Schedule.objects.using(self.using)
                .active()
                .filter(pk=schedule.pk, next_due_at=schedule.next_due_at)
                .update(**changes)
            )
            if not won:
                return None
            ScheduleTick.objects.using(self.using).bulk_create(
                [
                    ScheduleTick(schedule_id=schedule.pk, due_at=due, job_id=job.pk, fired_by=self.worker_id)
                    for due, (job, _) in run
                ]
            )
            fired = []
            for due, (job, fields) in run:
                stored, created = enqueuing.store(job, fields, self.using, robust=True)
                if created:
                    fired.append((stored, due))
                else:
                    self._overlapped(schedule, due, stored)
            if run and len(fired) < len(run):
                last = fired[-1][0].pk if fired else stored.pk
                Schedule.objects.using(self.using).filter(pk=schedule.pk).update(last_job_id=last)
        return fired

    def _overlapped(self, schedule: Schedule, due: datetime.datetime, holder: Job) -> None:
        ScheduleTick.objects.using(self.using).filter(schedule_id=schedule.pk, due_at=due).update(job_id=None)
        logger.info(
            "Schedule skipped a due time: its previous job is still active name=%s due=%s job=%s status=%s",
            schedule.name,
            due.isoformat(),
            holder.pk,
            holder.status,
        )

    def _broken(self, schedule: Schedule, exc: Exception) -> None:
        """A schedule that cannot fire (changed behind validation's back): log it, record why, retry later."""
        logger.error("Schedule cannot fire name=%s: %s", schedule.name, exc)
        self._unknown_until[schedule.pk] = time.monotonic() + float(settings.SCHEDULE_CHECK_INTERVAL)
        Schedule.objects.using(self.using).filter(pk=schedule.pk).update(last_error=str(exc)[:2000])

    def _prune_ticks(self) -> None:
        cutoff = timezone.now() - TICK_RETENTION
        try:
            for pk in Schedule.objects.using(self.using).values_list("pk", flat=True):
                ScheduleTick.objects.using(self.using).filter(schedule_id=pk, due_at__lt=cutoff).delete()
        except (DatabaseError, InterfaceError) as exc:
            logger.warning("Database error while deleting old schedule ticks: %s", exc)
            close_broken_connections()


def build_job(schedule: Schedule, due: datetime.datetime | None, using: str) -> tuple[Job, dict[str, Any]]:
    """The unsaved job for one run of `schedule`, validated; and its field values."""
    kwargs = dict(schedule.kwargs)
    if schedule.due_time_argument:
        kwargs[schedule.due_time_argument] = due.astimezone(datetime.timezone.utc).isoformat()
    fields, using = enqueuing.job_fields(
        schedule.job,
        tuple(schedule.args),
        kwargs,
        schedule.queue,
        schedule.priority,
        None,
        None,
        schedule.max_attempts,
        f"dbjobs-schedule:{schedule.name}" if schedule.no_overlap else None,
        using,
    )
    fields["scheduled_for"] = due
    return rows.build(fields, using), fields


def run_now(schedule: Schedule, using: str | None = None) -> tuple[Job, bool]:
    """Enqueue `schedule`'s job now, outside its due times; return it, and whether it is new.

    With no_overlap and a previous run still active, that job is returned instead.

    Not a tick: the schedule's next due time stays as it is. The job's due time (and
    its due-time argument) is the moment of the request.
    """
    using = using or schedule._state.db or "default"
    job, fields = build_job(schedule, timezone.now(), using)
    with transaction.atomic(using=using):
        stored, created = enqueuing.store(job, fields, using, robust=True)
    if created:
        logger.info("Schedule run now name=%s job=%s", schedule.name, stored.pk)
        send(schedule_fired, sender=Schedule, schedule=schedule, jobs=[stored], due_times=[], manual=True)
    return stored, created
