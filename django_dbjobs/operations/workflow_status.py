"""Workflows as dbjobs_status shows them: the batches not finished yet (on the batch table's
finished_at index), and what can no longer finish (stuck_workflows.py)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from django.db.models import Count, Min

from ..models import Batch
from .stuck_workflows import StuckWorkflow, read_stuck


@dataclass
class WorkflowStatus:
    open_batches: int = 0
    #: When the oldest batch not finished yet was created.
    oldest_open: datetime.datetime | None = None
    #: What keeps jobs waiting for ever: each one a standing problem.
    stuck: list[StuckWorkflow] = field(default_factory=list)
    #: Waiting jobs (callbacks included) that will never run because of it.
    never_run: int = 0
    #: More dependency rows or open batches than read: some of what is stuck may be unreported.
    truncated: bool = False

    def as_json(self, now: datetime.datetime) -> dict:
        age = None if self.oldest_open is None else round((now - self.oldest_open).total_seconds(), 3)
        return {
            "open_batches": self.open_batches,
            "oldest_open_batch_age_seconds": age,
            "stuck": [item.as_json() for item in self.stuck],
            "jobs_never_run": self.never_run,
            "stuck_search_truncated": self.truncated,
        }

    def lines(self) -> list[str]:
        """The workflows part of dbjobs_status's table; nothing when no batch is open or stuck."""
        lines = []
        if self.open_batches:
            lines.append(
                f"Open batches: {self.open_batches} (oldest created {self.oldest_open:%Y-%m-%d %H:%M} UTC)"
            )
        if self.stuck:
            lines.append(f"Stuck workflows: {len(self.stuck)} ({self.never_run} waiting jobs will never run)")
        return lines


def read_workflows(using: str = "default") -> WorkflowStatus:
    found = (
        Batch.objects.using(using)
        .filter(finished_at__isnull=True)
        .aggregate(n=Count("pk"), at=Min("created_at"))
    )
    stuck, never_run, truncated = read_stuck(using)
    return WorkflowStatus(found["n"], found["at"], stuck, never_run, truncated)
