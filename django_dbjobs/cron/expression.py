"""Cron arithmetic: due times of a cron expression in a timezone, stored in UTC. No database.

Due times are found in the schedule's wall-clock time and then placed on the UTC line:

- A wall time that does not exist (the hour skipped when clocks go forward) runs at
  the first valid instant after the gap: a 02:30 daily job runs at 03:00 that day.
  Several skipped times collapse into that one run.
- A wall time that happens twice (the hour repeated when clocks go back) runs once,
  at its first occurrence, unless the expression runs every hour (``*`` in the hour
  field): those run in both passes, since every real hour is an hour for them.
"""

from __future__ import annotations

import datetime
import zoneinfo
from collections import deque
from dataclasses import dataclass, field

from croniter import CroniterBadDateError, croniter

from ..exceptions import InvalidSchedule
from . import fields as cron_fields

UTC = datetime.timezone.utc
ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# Steps a search may take before giving up on an expression that (almost) never matches.
_SEARCH_LIMIT = 100_000
_SECOND = datetime.timedelta(seconds=1)


def zone(name: str) -> zoneinfo.ZoneInfo:
    """The timezone called `name` (IANA), or InvalidSchedule."""
    if not isinstance(name, str) or not name:
        raise InvalidSchedule(f"The timezone must be an IANA name such as 'Europe/Paris', not {name!r}.")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            f"Unknown timezone {name!r}. Use an IANA name such as 'Europe/Paris' or 'UTC'."
        ) from None


@dataclass(frozen=True)
class Cron:
    """A cron expression in a timezone: 5 fields, 6 with seconds first, or an @alias."""

    expression: str
    timezone: str = "UTC"
    _tz: zoneinfo.ZoneInfo = field(init=False, repr=False, compare=False)
    _seconds: bool = field(init=False, repr=False, compare=False)
    _every_hour: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        expression = self.expression
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidSchedule(f"A cron expression must be a non-empty string, not {expression!r}.")
        fields = expression.split()
        if fields[0].startswith("@"):
            if len(fields) != 1 or fields[0].lower() not in ALIASES:
                raise InvalidSchedule(f"Unknown cron alias {expression!r}; use one of {', '.join(ALIASES)}.")
            hour = "*" if fields[0].lower() == "@hourly" else "0"
        elif len(fields) not in (5, 6):
            raise InvalidSchedule(
                f"The cron expression {expression!r} has {len(fields)} fields; give 5 "
                "(minute hour day month weekday) or 6 (second minute hour day month weekday)."
            )
        else:
            hour = fields[-4]
            problems = cron_fields.problems(expression)
            if problems:
                raise InvalidSchedule(" ".join(problems))
        object.__setattr__(self, "_tz", zone(self.timezone))
        object.__setattr__(self, "_seconds", len(fields) == 6)
        object.__setattr__(self, "_every_hour", hour in ("*", "*/1"))
        try:
            self._iterate(datetime.datetime(2000, 1, 1)).get_next(datetime.datetime)
        except CroniterBadDateError:
            raise InvalidSchedule(cron_fields.never_matches(expression)) from None
        except Exception:  # noqa: BLE001 - croniter raises several kinds
            raise InvalidSchedule(f"The cron expression {expression!r} cannot be read.") from None
        # An expression that never matches (such as 30 February) is found here, not at run time.
        self.next_after(datetime.datetime(2000, 1, 1, tzinfo=UTC))

    def _iterate(self, start: datetime.datetime) -> croniter:
        return croniter(
            self.expression,
            start,
            ret_type=datetime.datetime,
            second_at_beginning=self._seconds,
            max_years_between_matches=50,
        )

    def next_after(self, after: datetime.datetime) -> datetime.datetime:
        """The first due time strictly after `after` (aware), in UTC."""
        after = after.astimezone(UTC)
        local = after.astimezone(self._tz)  # fold=1 in the second pass of a repeated hour
        try:
            walls = self._iterate(local.replace(tzinfo=None))
            found = None
            for _ in range(_SEARCH_LIMIT):
                wall = walls.get_next(datetime.datetime)
                found = next((at for at in self._instants(wall) if at > after), None)
                if found is not None:
                    break
        except Exception:  # noqa: BLE001 - croniter gives up on dates it cannot find
            raise InvalidSchedule(cron_fields.never_matches(self.expression)) from None
        if found is None:
            raise InvalidSchedule(cron_fields.never_matches(self.expression))
        if self._every_hour:
            repeated = self._second_pass(after, found)
            if repeated is not None:
                return repeated
        return found

    def _instants(self, wall: datetime.datetime) -> list[datetime.datetime]:
        """The UTC instants at which the naive `wall` time runs (see the module docstring)."""
        first = wall.replace(tzinfo=self._tz, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=self._tz, fold=1).astimezone(UTC)
        if first == second:
            return [first]
        if first.astimezone(self._tz).replace(tzinfo=None) != wall:
            # Skipped by the clocks going forward: fold=0 reads it with the offset before
            # the gap, fold=1 with the one after; the gap's end lies between the two.
            return [self._transition(min(first, second), max(first, second))]
        return [first, second] if self._every_hour else [first]

    def _transition(self, before: datetime.datetime, after: datetime.datetime) -> datetime.datetime:
        """The first instant in (`before`, `after`] with `after`'s UTC offset, to the second."""
        offset = after.astimezone(self._tz).utcoffset()
        low, high = before, after
        while high - low > _SECOND:
            middle = low + (high - low) / 2
            middle = middle.replace(microsecond=0)
            if middle <= low:
                break
            if middle.astimezone(self._tz).utcoffset() == offset:
                high = middle
            else:
                low = middle
        return high

    def _second_pass(self, after: datetime.datetime, found: datetime.datetime) -> datetime.datetime | None:
        """The first run in the second pass of an hour repeated between `after` and `found`, if any.

        Walking wall times forward from a time in the first pass jumps straight past the
        repeated hour's second pass; an every-hour expression runs there too.
        """
        before_offset = after.astimezone(self._tz).utcoffset()
        horizon = min(found, after + datetime.timedelta(days=2))  # clocks change at most once in two days
        if horizon.astimezone(self._tz).utcoffset() >= before_offset:
            return None  # the clocks did not go back in between
        change = self._transition(after, horizon)
        repeat_start = change.astimezone(self._tz).replace(tzinfo=None)  # wall time the clocks went back to
        repeat_end = repeat_start + (before_offset - change.astimezone(self._tz).utcoffset())
        wall = self._iterate(repeat_start - _SECOND).get_next(datetime.datetime)
        while wall < repeat_end:
            at = wall.replace(tzinfo=self._tz, fold=1).astimezone(UTC)
            if after < at < found:
                return at
            wall = self._iterate(wall).get_next(datetime.datetime)
        return None

    def due_times(
        self, first: datetime.datetime, until: datetime.datetime, most: int
    ) -> tuple[list[datetime.datetime], int, bool]:
        """Due times from `first` (a due time) to `until`: the latest `most`, how many earlier, and if exact.

        Bounded however long the span: after `most` steps forward it jumps back from
        `until` instead, so a year of a per-second schedule costs milliseconds; the
        count of earlier ones is then a lower bound.
        """
        times: list[datetime.datetime] = []
        at = first
        while at <= until:
            if len(times) == most:
                start = self._back_from(until, most)
                jumped = start > at  # else the span was short after all: count on from `at`
                window: deque[datetime.datetime] = deque([] if jumped else times, maxlen=most)
                total = len(window)
                start = start if jumped else at
                while start <= until:
                    window.append(start)
                    total += 1
                    start = self.next_after(start)
                # Jumped: the `most` due times walked first are earlier, and maybe more.
                return list(window), total - len(window) + (most if jumped else 0), not jumped
            times.append(at)
            at = self.next_after(at)
        return times, 0, True

    def _back_from(self, until: datetime.datetime, count: int) -> datetime.datetime:
        """An instant at or before the `count`-th latest due time up to `until`.

        Walks back matching wall times with croniter until it has seen `count` distinct
        due instants up to `until`: the earliest of any `count` of them is at or before
        the `count`-th latest, whatever order daylight saving puts them in.
        """
        local = until.astimezone(self._tz)
        walls = croniter(
            self.expression,
            local.replace(tzinfo=None) + _SECOND,
            ret_type=datetime.datetime,
            is_prev=True,
            second_at_beginning=self._seconds,
            max_years_between_matches=50,
        )
        seen: set[datetime.datetime] = set()
        while len(seen) < count:
            seen.update(at for at in self._instants(walls.get_prev(datetime.datetime)) if at <= until)
        return self.next_after(min(seen) - _SECOND)
