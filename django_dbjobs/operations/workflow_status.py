"""Workflows as dbjobs_status shows them: the batches not finished yet (on the batch table's
finished_at index, never a read of the jobs)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.db.models import Count, Min

from ..models import Batch


@dataclass
class WorkflowStatus:
    open_batches: int = 0
    #: When the oldest batch not finished yet was created.
    oldest_open: datetime.datetime | None = None

    def as_json(self, now: datetime.datetime) -> dict:
        age = None if self.oldest_open is None else round((now - self.oldest_open).total_seconds(), 3)
        return {"open_batches": self.open_batches, "oldest_open_batch_age_seconds": age}

    def lines(self) -> list[str]:
        """The workflows part of dbjobs_status's table; nothing when no batch is open."""
        if not self.open_batches:
            return []
        return [f"Open batches: {self.open_batches} (oldest created {self.oldest_open:%Y-%m-%d %H:%M} UTC)"]


def read_workflows(using: str = "default") -> WorkflowStatus:
    found = (
        Batch.objects.using(using)
        .filter(finished_at__isnull=True)
        .aggregate(n=Count("pk"), at=Min("created_at"))
    )
    return WorkflowStatus(found["n"], found["at"])
