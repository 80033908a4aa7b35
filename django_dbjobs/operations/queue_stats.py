"""Per-queue counts and lag, and jobs finished per minute: what the admin overview shows."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from django.db.models import Case, Count, Min, Q, QuerySet, Value, When
from django.db.models.functions import Now, TruncMinute

from .. import db
from ..conf import settings
from ..models import Blocked, Job, JobStatus, Queue
from ..models.clock import database_clock
from ..models.states import HANDED_BACK_PREFIX


@dataclass
class QueueRow:
    name: str
    due: int = 0
    later: int = 0
    running: int = 0
    failed: int = 0
    oldest_due: datetime.datetime | None = None
    paused_at: datetime.datetime | None = None
    paused_by: str = ""
    #: Seconds the oldest due job has waited (the queue's lag), by the database clock.
    lag: float | None = field(default=None)
    #: READY jobs a worker handed back because it did not know them (unknown_jobs.py).
    handed_back: int = 0
    #: READY jobs flow control holds back, by reason (a Blocked value: CONCURRENCY, RATE, AFTER).
    blocked: dict[str, int] = field(default_factory=dict)

    @property
    def paused(self) -> bool:
        return self.paused_at is not None


def queue_rows(using: str = "default", hand_backs: bool = True) -> list[QueueRow]:
    """One row per queue that has READY, RUNNING or FAILED jobs, is paused, or is in DBJOBS_QUEUES.

    One grouped query over the failed jobs (from their index alone), one over the ready
    and running ones (which also counts those handed back as unknown, unless
    `hand_backs` is False), one over the queue table; finished successes are never read.
    The hand-back count reads each ready job's ``last_error``: without it, the ready and
    running jobs are counted from their index alone (live_jobs_by_queue(); the gauges).
    """
    now = database_clock(using)
    rows: dict[str, QueueRow] = {name: QueueRow(name) for name in settings.QUEUES or []}
    jobs = Job.objects.using(using)
    # COUNT(*), not COUNT(id): the failed count is then read from the index alone.
    failed = jobs.failed().values_list("queue").annotate(count=Count("*")).order_by()
    for queue, count in failed:
        rows.setdefault(queue, QueueRow(queue)).failed = count
    active = live_jobs_by_queue(using, hand_backs)
    if hand_backs:  # each ready job's row read: with a large backlog, compiling cost more (db/planner.py)
        with db.without_jit(using):
            active = list(active)
    for queue, status, is_due, blocked, count, oldest, handed_back in active:
        row = rows.setdefault(queue, QueueRow(queue))
        if status == JobStatus.READY:
            row.handed_back += handed_back
            if blocked:
                row.blocked[blocked] = row.blocked.get(blocked, 0) + count
        if status == JobStatus.RUNNING:
            row.running += count
        elif is_due:
            row.due += count
            row.oldest_due = oldest if row.oldest_due is None else min(row.oldest_due, oldest)
        else:
            row.later += count
    for queue in Queue.objects.using(using).all():
        row = rows.setdefault(queue.name, QueueRow(queue.name))
        row.paused_at, row.paused_by = queue.paused_at, queue.paused_by
    for row in rows.values():
        if row.oldest_due is not None:
            row.lag = max((now - row.oldest_due).total_seconds(), 0.0)
    return sorted(rows.values(), key=lambda row: row.name)


def live_jobs_by_queue(using: str = "default", hand_backs: bool = True) -> QuerySet:
    """The READY and RUNNING jobs counted by queue, status, due or not and blocked, with
    the oldest run_at of each group and (if `hand_backs`) those handed back as unknown.

    Without `hand_backs`, read from db.ActiveJobsIndex alone (no row of the table).
    """
    handed_back = Count("id", filter=Q(last_error__startswith=HANDED_BACK_PREFIX)) if hand_backs else Value(0)
    return (
        # An OR, not status__in: SQLite matches the partial index of the live jobs
        # (db.ActiveJobsIndex) to bound parameters only in that form.
        Job.objects.using(using)
        .filter(Q(status=JobStatus.READY) | Q(status=JobStatus.RUNNING))
        .annotate(
            # A job waiting for others (Blocked.AFTER) is not due: it counts as later.
            is_due=Case(
                When(
                    Q(status=JobStatus.READY, run_at__lte=Now()) & ~Q(blocked=Blocked.AFTER), then=Value(True)
                ),
                default=False,
            )
        )
        .values_list("queue", "status", "is_due", "blocked")
        .annotate(count=Count("*"), oldest=Min("run_at"), handed_back=handed_back)
        .order_by()
    )


@dataclass
class Minute:
    at: datetime.datetime
    succeeded: int = 0
    failed: int = 0


def finished_per_minute(minutes: int = 60, using: str = "default") -> list[Minute]:
    """Jobs that succeeded and failed in each of the last `minutes` minutes, oldest first.

    Reads the finished-jobs index (status, finished_at): only the last hour's jobs.
    """
    now = database_clock(using).replace(second=0, microsecond=0)
    start = now - datetime.timedelta(minutes=minutes - 1)
    buckets = {
        start + datetime.timedelta(minutes=n): Minute(start + datetime.timedelta(minutes=n))
        for n in range(minutes)
    }
    for status in (JobStatus.SUCCESSFUL, JobStatus.FAILED):
        # One query per status: each is a range of the finished-jobs index on every database.
        counts = (
            Job.objects.using(using)
            .filter(status=status, finished_at__gte=start)
            .annotate(minute=TruncMinute("finished_at", tzinfo=datetime.timezone.utc))
            .values_list("minute")
            .annotate(count=Count("*"))
            .order_by()
        )
        for minute, count in counts:
            if minute is None:  # MySQL without time zone tables, with a DATABASES TIME_ZONE
                continue
            bucket = buckets.get(minute.astimezone(datetime.timezone.utc).replace(second=0, microsecond=0))
            if bucket is None:
                continue
            if status == JobStatus.SUCCESSFUL:
                bucket.succeeded += count
            else:
                bucket.failed += count
    return list(buckets.values())
