"""Missed runs: which due times a scheduler runs when it comes late, by a schedule's policy. No database."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from .expression import Cron

#: The most missed due times the "all" policy runs after downtime (the latest ones).
MAX_CATCH_UP = 100
#: A due time at most this many seconds old is late, not missed: it always runs.
ON_TIME = datetime.timedelta(seconds=5)


@dataclass(frozen=True)
class Plan:
    """What a scheduler does for one schedule now: the due times to run, and the next due time."""

    run: list[datetime.datetime]
    next_due: datetime.datetime
    missed: int  # due times passed and not run (a lower bound when `more_missed`)
    more_missed: bool = False
    #: Why the missed due times did not run, or only some did: for the scheduler's log line.
    reason: str = ""


def plan(
    cron: Cron,
    next_due: datetime.datetime,
    now: datetime.datetime,
    policy: str,
    window: datetime.timedelta,
) -> Plan:
    """Decide which due times from `next_due` up to `now` to run, under a missed-run policy.

    Due times at most ON_TIME old always run, each once. Older ones were missed (no
    scheduler ran then): "latest" runs the latest of them if none ran on time and it is
    younger than `window`; "skip" runs none; "all" runs each, the latest MAX_CATCH_UP at most.
    """
    times, earlier, exact = cron.due_times(next_due, now, MAX_CATCH_UP)
    if not times:
        return Plan([], next_due, 0)
    on_time = [at for at in times if now - at <= ON_TIME]
    missed = times[: len(times) - len(on_time)]
    if policy == "all":
        run = times
    elif policy == "latest" and missed and not on_time and now - missed[-1] <= window:
        run = [missed[-1]]
    else:
        run = on_time
    skipped = len(times) - len(run) + earlier
    why = _reason(policy, missed, bool(on_time), now, window)
    return Plan(run, cron.next_after(times[-1]), skipped, more_missed=not exact, reason=why)


def _reason(
    policy: str,
    missed: list[datetime.datetime],
    on_time: bool,
    now: datetime.datetime,
    window: datetime.timedelta,
) -> str:
    """Why the missed due times did not all run, in words for the scheduler's log line."""
    if policy == "latest" and missed and not on_time and now - missed[-1] > window:
        return (
            f"the latest, due {missed[-1].isoformat()}, was {(now - missed[-1]).total_seconds():.0f} s "
            f"late, past its catch_up_window of {window.total_seconds():.0f} s, so none ran"
        )
    if policy == "latest" and on_time:
        return "a due time came on time, so missed_runs=latest runs none of the missed ones"
    return {
        "latest": "missed_runs=latest runs the latest missed due time only",
        "skip": "missed_runs=skip runs none",
        "all": f"missed_runs=all runs the latest {MAX_CATCH_UP} at most",
    }.get(policy, "")
