"""How long the loop's wait may last: the poll interval, cut short by what falls due sooner."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..running import deadlines

if TYPE_CHECKING:
    from ...schedules.scheduler import Scheduler
    from .parts import Parts


def wait_time(poll_interval: float, parts: Parts, scheduler: Scheduler | None) -> float:
    """Seconds until the loop must look again even if nothing wakes it: a success batch to
    store, a job deadline (with 10 ms to spare, so it is past), a cancel request to look for
    while jobs run and their progress to write (each once a second, whatever the poll interval),
    a cron schedule due."""
    due = parts.acks.due_in()
    wait = poll_interval if due is None else min(poll_interval, due)
    deadline = deadlines.due_in()
    if deadline is not None:
        wait = min(wait, deadline + 0.01)
    if parts.held:
        wait = min(wait, parts.cancels.due_in() + 0.01, parts.progress.due_in() + 0.01)
    return wait if scheduler is None else min(wait, scheduler.due_in())
