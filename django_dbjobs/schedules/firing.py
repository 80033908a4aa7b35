"""Firing one schedule: the jobs of its due times, exactly once, in one transaction.

The transaction first locks the schedule's row (SKIP LOCKED: a row held by another
transaction is tried again a second later, never waited for in the worker's loop),
checks that its due time, cron expression and timezone are still those this
scheduler read (a compare-and-set: a locking read sees the latest committed row, even
under MySQL's REPEATABLE READ), and moves ``next_due_at`` on. A racing scheduler finds
the row locked, or moved on, and writes nothing. SQLite has one writer at a time
(BEGIN IMMEDIATE), so the same check holds there. Then one ScheduleTick per
due time run, unique on (schedule, due time): a second job for a due time is refused
even if the fence were ever bypassed (a stale write putting a schedule back on a due
time already fired). Then the jobs. No user code runs inside the transaction: save
signals are not sent, and job_enqueued and schedule_fired go out after the commit. A
scheduler killed at any point commits nothing, so the due time stays due.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models.functions import Now
from django.utils import timezone

from .. import db
from ..cron import missed_runs
from ..enqueuing import api as enqueuing
from ..enqueuing import rows
from ..enqueuing.spec import JobSpec
from ..exceptions import InvalidSchedule
from ..models import Job, Schedule, ScheduleTick
from ..observability import log_fields, producing
from ..signals import job_enqueued, schedule_fired, send

logger = logging.getLogger("django_dbjobs")


@dataclass
class Fired:
    """What firing a schedule did: the jobs made, for which due times, and the next due time."""

    next_due: datetime.datetime
    won: bool = False
    #: Another transaction held the schedule's row: try again soon.
    busy: bool = False
    jobs: list[Job] = field(default_factory=list)
    due_times: list[datetime.datetime] = field(default_factory=list)


def build_job(
    schedule: Schedule, due: datetime.datetime, using: str, trace: dict | None = None
) -> tuple[Job, dict[str, Any]]:
    """The unsaved job for one run of `schedule`, validated (InvalidJob if not); and its fields.

    `trace`: the trace context of the span that sends it (observability/producing.py)."""
    kwargs = dict(schedule.kwargs)
    if schedule.due_time_argument:
        kwargs[schedule.due_time_argument] = due.astimezone(datetime.timezone.utc).isoformat()
    spec = JobSpec(
        queue=schedule.queue,
        priority=schedule.priority,
        max_attempts=schedule.max_attempts,
        unique_key=f"dbjobs-schedule:{schedule.name}" if schedule.no_overlap else None,
        using=using,
        capture_context=False,  # a scheduler has no enqueuer
        trace_context=trace,
    )
    fields, using = enqueuing.job_fields(schedule.job, tuple(schedule.args), kwargs, spec)
    fields["scheduled_for"] = due
    return rows.build(fields, using), fields


def fire(schedule: Schedule, now: datetime.datetime, worker_id: str, using: str) -> Fired:
    """Fire `schedule`'s due times up to `now` (the database clock), as its missed-run policy says.

    Raises InvalidSchedule or InvalidJob (the schedule cannot fire as it stands) before
    writing anything.
    """
    return producing.send(lambda trace: _fire(schedule, now, worker_id, using, trace), _fired_jobs)


def _fired_jobs(fired: Fired) -> list[Job]:
    return fired.jobs


def _fire(
    schedule: Schedule, now: datetime.datetime, worker_id: str, using: str, trace: dict | None
) -> Fired:
    plan = missed_runs.plan(
        schedule.cron_schedule(),
        schedule.next_due_at,
        now,
        schedule.missed_runs,
        datetime.timedelta(seconds=schedule.catch_up_window),
    )
    built = [build_job(schedule, due, using, trace) for due in plan.run]
    skip: set[datetime.datetime] = set()
    for _ in range(3):
        fired = Fired(plan.next_due)
        try:
            _commit(schedule, plan, built, skip, worker_id, using, fired)
            break
        except IntegrityError:
            # A tick exists for one of these due times: it ran already, never again.
            ticks = ScheduleTick.objects.using(using).filter(schedule=schedule, due_at__in=plan.run)
            skip = set(ticks.values_list("due_at", flat=True))
    else:
        raise InvalidSchedule("Its due times could not be recorded: a tick exists for each try.")
    if not fired.won:
        return fired
    if plan.missed or plan.more_missed:
        logger.warning(
            "Schedule missed due times name=%s missed=%s%s policy=%s ran=%s: %s",
            schedule.name,
            plan.missed,
            "+" if plan.more_missed else "",
            schedule.missed_runs,
            len(fired.jobs),
            plan.reason,
            extra=log_fields.for_schedule(schedule.name),
        )
    for job, due in zip(fired.jobs, fired.due_times, strict=True):
        logger.info(
            "Schedule fired name=%s due=%s job=%s",
            schedule.name,
            due.isoformat(),
            job.pk,
            extra=log_fields.for_schedule(schedule.name, job),
        )
        send(job_enqueued, job=job)
    if fired.jobs:
        send(
            schedule_fired,
            sender=Schedule,
            schedule=schedule,
            jobs=fired.jobs,
            due_times=fired.due_times,
            manual=False,
        )
    return fired


def _commit(schedule, plan, built, skip, worker_id: str, using: str, fired: Fired) -> None:
    run = [(due, job, fields) for due, (job, fields) in zip(plan.run, built, strict=True) if due not in skip]
    with transaction.atomic(using=using):
        changes: dict[str, Any] = {"next_due_at": plan.next_due, "last_error": ""}
        if run:
            changes.update(last_due_at=run[-1][0], last_job_id=run[-1][1].pk, last_fired_at=Now())
        rows = Schedule.objects.using(using).filter(pk=schedule.pk)
        current = db.lock_or_skip(rows.active()).values_list("next_due_at", "cron", "timezone").first()
        if current is None:
            fired.busy = rows.active().exists()  # locked by another transaction, or disabled
            return
        if current != (schedule.next_due_at, schedule.cron, schedule.timezone):
            return  # another scheduler fired it first, or it was changed meanwhile
        rows.update(**changes)
        fired.won = True
        ScheduleTick.objects.using(using).bulk_create(
            [
                ScheduleTick(schedule_id=schedule.pk, due_at=due, job_id=job.pk, fired_by=worker_id)
                for due, job, _ in run
            ]
        )
        last = None
        for due, job, fields in run:
            stored, created = enqueuing.store(job, fields, using, quiet=True)
            last = stored
            if created:
                fired.jobs.append(stored)
                fired.due_times.append(due)
                continue
            ScheduleTick.objects.using(using).filter(schedule_id=schedule.pk, due_at=due).update(job_id=None)
            logger.info(
                "Schedule skipped a due time: its previous job is still active name=%s due=%s job=%s",
                schedule.name,
                due.isoformat(),
                stored.pk,
                extra=log_fields.for_schedule(schedule.name, stored),
            )
        if last is not None and last.pk != run[-1][1].pk:
            Schedule.objects.using(using).filter(pk=schedule.pk).update(last_job_id=last.pk)


def run_now(schedule: Schedule, using: str | None = None) -> tuple[Job, bool]:
    """Enqueue `schedule`'s job now, outside its due times; return it, and whether it is new.

    A manual run, not a tick: the next due time stays, and the schedule records it as
    its last manual run. The job's ``scheduled_for`` (and due-time argument) is the
    moment of the request. With no_overlap and a previous run still active, that job
    is returned instead.
    """
    using = using or schedule._state.db or "default"
    return producing.send(lambda trace: _run_now(schedule, using, trace), producing.first)


def _run_now(schedule: Schedule, using: str, trace: dict | None) -> tuple[Job, bool]:
    requested = timezone.now()
    job, fields = build_job(schedule, requested, using, trace)
    with transaction.atomic(using=using):
        stored, created = enqueuing.store(job, fields, using, quiet=True)
        if created:
            Schedule.objects.using(using).filter(pk=schedule.pk).update(
                last_manual_job_id=stored.pk, last_manual_at=requested
            )

            def sent() -> None:
                logger.info(
                    "Schedule run now name=%s job=%s",
                    schedule.name,
                    stored.pk,
                    extra=log_fields.for_schedule(schedule.name, stored),
                )
                send(job_enqueued, job=stored)
                send(
                    schedule_fired,
                    sender=Schedule,
                    schedule=schedule,
                    jobs=[stored],
                    due_times=[],
                    manual=True,
                )

            transaction.on_commit(sent, using=using)
    return stored, created
