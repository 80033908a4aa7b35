"""ScheduleQuerySet: the schedules a scheduler reads, and enabling or disabling many at once."""

from __future__ import annotations

import datetime

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now

#: The fields that decide when a schedule is due: changing one gives it a new next due time.
TIMING_FIELDS = ("cron", "timezone", "enabled", "removed_at")


class ScheduleQuerySet(models.QuerySet):
    def active(self) -> ScheduleQuerySet:
        """Schedules a scheduler fires: enabled, and not removed from DBJOBS_SCHEDULES."""
        return self.filter(enabled=True, removed_at=None)

    def due_within(self, seconds: float) -> ScheduleQuerySet:
        """Active schedules due within `seconds` by the database clock, soonest first.

        Also those with no next due time yet (made by bulk_create(), a data migration or
        update(enabled=True)), first: the scheduler gives them one.
        """
        soon = Now() + datetime.timedelta(seconds=seconds)
        return (
            self.active()
            .filter(Q(next_due_at=None) | Q(next_due_at__lte=soon))
            .order_by(F("next_due_at").asc(nulls_first=True))
        )

    def enable(self) -> int:
        """Enable these schedules from now on (no catch-up for the time they were off); return how many."""
        count = 0
        for schedule in self.filter(enabled=False):
            schedule.enabled = True
            schedule.save()
            count += 1
        return count

    def disable(self) -> int:
        """Disable these schedules; return how many."""
        return self.filter(enabled=True).update(enabled=False, next_due_at=None, updated_at=Now())

    def update(self, **kwargs) -> int:
        """update(); changing cron, timezone, enabled or removed_at also clears next_due_at.

        The first scheduler that reads such a row gives it its next due time from now,
        so a schedule switched back on by update(enabled=True) does not catch up.
        """
        if "next_due_at" not in kwargs and any(field in kwargs for field in TIMING_FIELDS):
            kwargs["next_due_at"] = None
        return super().update(**kwargs)
