"""The scheduler: every worker fires due schedules (firing.py makes each due time one job).

Called from the worker's loop like the sweep: fire_if_due() does nothing until the
next check is due. A check is one indexed query for the schedules due within
DBJOBS_SCHEDULE_CHECK_INTERVAL; the next check is at the soonest next due time, or
after that interval. A schedule saved in this process (or, on PostgreSQL, in any
process) makes the next call check at once. One schedule that cannot fire is logged,
recorded on its row and set aside for an interval; it never stops the others.
"""

from __future__ import annotations

import datetime
import logging
import time

from django.conf import settings as django_settings
from django.db import DatabaseError, InterfaceError
from django.db.models.functions import Now
from django.utils import timezone

from .. import db
from ..conf import settings
from ..db.outage import close_broken_connections
from ..enqueuing import wakeup
from ..exceptions import UnknownJob
from ..models import Schedule, ScheduleTick
from ..observability import log_fields
from . import definitions as schedules
from . import firing

logger = logging.getLogger("django_dbjobs")

#: Schedules read per check; more due at once are fired on the next pass, at once.
BATCH = 100
#: Ticks older than this are deleted (hourly, by each scheduler); the schedule's own
#: next_due_at already keeps a due time from firing twice once it has passed.
TICK_RETENTION = datetime.timedelta(days=7)
PRUNE_INTERVAL = 3600.0
#: Pause after a database error before the next check, doubling up to MAX_PAUSE.
FIRST_PAUSE = 1.0
MAX_PAUSE = 30.0


class Scheduler:
    """Fire due schedules from a worker's loop: call fire_if_due() often; it queries only when due."""

    def __init__(self, worker_id: str, using: str = "default"):
        self.worker_id = worker_id
        self.using = using
        self._next_check = 0.0
        self._pause = FIRST_PAUSE
        self._generation = wakeup.schedule_generation()
        self._next_prune = time.monotonic() + 60.0
        self._set_aside: dict[int, float] = {}  # schedule id -> monotonic time it may be tried again
        self._reported: set[tuple[int, str]] = set()

    def sync_settings(self) -> None:
        schedules.sync_settings(self.using)

    def due_in(self) -> float:
        """Seconds until fire_if_due() has work to do."""
        if wakeup.schedule_generation() != self._generation:
            return 0.0
        return max(self._next_check - time.monotonic(), 0.0)

    def fire_if_due(self) -> None:
        if self.due_in() > 0 or not django_settings.USE_TZ:  # schedules need aware datetimes
            return
        self._generation = wakeup.schedule_generation()
        now = time.monotonic()
        try:
            self._next_check = now + self.fire_due()
            self._pause = FIRST_PAUSE
        except (DatabaseError, InterfaceError) as exc:
            logger.warning("Database error while firing schedules, next try in %.0fs: %s", self._pause, exc)
            close_broken_connections()
            self._next_check, self._pause = now + self._pause, min(self._pause * 2, MAX_PAUSE)
        except Exception:  # noqa: BLE001 - the scheduler must never stop the worker
            logger.exception("Unexpected error while firing schedules")
            self._next_check = now + FIRST_PAUSE
        if now >= self._next_prune:
            self._next_prune = now + PRUNE_INTERVAL
            self._prune_ticks()

    def fire_due(self) -> float:
        """Fire every schedule due by the database clock; return seconds until the next check."""
        interval = float(settings.SCHEDULE_CHECK_INTERVAL)
        wait = interval
        now = time.monotonic()
        self._set_aside = {pk: until for pk, until in self._set_aside.items() if until > now}
        query = Schedule.objects.using(self.using).due_within(interval).exclude(pk__in=list(self._set_aside))
        read = list(query.annotate(db_now=Now())[:BATCH])
        for schedule in read:
            if schedule.next_due_at is None:
                self._give_next_due(schedule)
                wait = 0.0
                continue
            if schedule.next_due_at > schedule.db_now:
                wait = min(wait, (schedule.next_due_at - schedule.db_now).total_seconds())
                break
            next_due = self._fire(schedule)
            if next_due is not None:
                wait = min(wait, (next_due - schedule.db_now).total_seconds())
        else:
            if len(read) == BATCH:  # every schedule read was due: more may be waiting
                wait = 0.0
        return max(wait, 0.0)

    def _fire(self, schedule: Schedule) -> datetime.datetime | None:
        """Fire one due schedule; return its next due time, or None if it was set aside."""
        try:
            fired = firing.fire(schedule, schedule.db_now, self.worker_id, self.using)
        except UnknownJob as exc:
            # A rolling deploy: this worker does not know the job (yet, or any more);
            # leave the due time to a worker that does.
            self._set_aside_for(schedule, f"No worker here knows its job: {exc}", level=logging.WARNING)
            return None
        except (DatabaseError, InterfaceError) as exc:
            if db.error_kind(exc, self.using) is db.ErrorKind.OUTAGE:
                raise
            self._set_aside_for(schedule, f"The database refused its job: {exc}")
            return None
        except Exception as exc:  # noqa: BLE001 - invalid arguments, a broken row: this schedule alone
            self._set_aside_for(schedule, f"{type(exc).__name__}: {exc}")
            return None
        if self._reported:  # fired: report its next problem again
            self._reported = {reported for reported in self._reported if reported[0] != schedule.pk}
        if fired.busy:  # its row is locked by another transaction: try again soon
            return schedule.db_now + datetime.timedelta(seconds=FIRST_PAUSE)
        # Won or lost, the schedule is next due then (a lost race: the winner moved it there).
        return fired.next_due

    def _give_next_due(self, schedule: Schedule) -> None:
        """Give a schedule written around save() (no next due time) one, fenced on it having none."""
        try:
            next_due = schedule.cron_schedule().next_after(schedule.db_now)
        except Exception as exc:  # noqa: BLE001
            self._set_aside_for(schedule, f"{type(exc).__name__}: {exc}")
            return
        Schedule.objects.using(self.using).active().filter(pk=schedule.pk, next_due_at=None).update(
            next_due_at=next_due
        )

    def _set_aside_for(self, schedule: Schedule, problem: str, level: int = logging.ERROR) -> None:
        """Log (once per problem), record on the row, and skip this schedule for an interval."""
        self._set_aside[schedule.pk] = time.monotonic() + float(settings.SCHEDULE_CHECK_INTERVAL)
        if (schedule.pk, problem) not in self._reported:
            self._reported.add((schedule.pk, problem))
            logger.log(
                level,
                "Schedule cannot fire name=%s: %s",
                schedule.name,
                problem,
                extra=log_fields.for_schedule(schedule.name),
            )
        Schedule.objects.using(self.using).filter(pk=schedule.pk).update(last_error=problem[:2000])

    def _prune_ticks(self) -> None:
        cutoff = timezone.now() - TICK_RETENTION
        try:
            for pk in Schedule.objects.using(self.using).values_list("pk", flat=True):
                ScheduleTick.objects.using(self.using).filter(schedule_id=pk, due_at__lt=cutoff).delete()
        except (DatabaseError, InterfaceError) as exc:
            logger.warning("Database error while deleting old schedule ticks: %s", exc)
            close_broken_connections()
