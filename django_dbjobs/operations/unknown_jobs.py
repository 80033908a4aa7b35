"""Jobs handed back because a worker did not know them: their record, the worker's hint, who waits.

A row whose name no worker has registered goes back to READY for a worker that knows
it (a rolling deploy) until DBJOBS_UNKNOWN_JOB_GRACE dead-letters it (worker/running/execution.py).
Until then it must not look like an ordinary waiting job: its ``last_error`` begins
with HANDED_BACK_PREFIX, which is how dbjobs_status and the admin find it (a worker
that knew it and gave it back, at shutdown or by the sweep, clears it).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.db.models import Count, Min

from ..conf import settings
from ..models import Job, JobStatus
from ..models.states import HANDED_BACK_PREFIX
from ..registry import discovery

#: Names whose hand-back this process has explained in its log: once per name is enough.
_explained: set[str] = set()


def summary(name: str, worker: str, grace: float) -> str:
    """The hand-back's last_error: which worker did not know the job, and what happens next."""
    return (
        f"{HANDED_BACK_PREFIX} {name!r} is not a registered job in worker {worker}. It goes back for a "
        f"worker that knows it, and is dead-lettered once DBJOBS_UNKNOWN_JOB_GRACE ({grace:g} s) has "
        "passed since its enqueue."
    )


def first_time_hint(name: str, grace: float) -> str:
    """How to make workers know `name`, the first time this process hands it back; else ''."""
    if name in _explained:
        return ""
    _explained.add(name)
    return (
        f". {discovery.modules_sentence()} If {name} is defined in another module, move it to one of "
        "them or add that module to DBJOBS_JOB_MODULES; if a newer release defines it, its workers will "
        f"run it. A job no worker knows is dead-lettered {grace:g} s after its enqueue "
        "(DBJOBS_UNKNOWN_JOB_GRACE)."
    )


def is_waiting(job: Job) -> bool:
    """Whether `job` is READY because a worker did not know it."""
    return job.status == JobStatus.READY and job.last_error.startswith(HANDED_BACK_PREFIX)


def dead_letter_at(enqueued_at: datetime.datetime | None) -> datetime.datetime | None:
    """When a job enqueued then and handed back as unknown is dead-lettered, if no worker knows it by then."""
    if not isinstance(enqueued_at, datetime.datetime):  # None, or an expression the database fills in
        return None
    return enqueued_at + datetime.timedelta(seconds=float(settings.UNKNOWN_JOB_GRACE))


@dataclass
class UnknownName:
    """A job name some worker did not know, with the READY jobs of it that wait for one that does."""

    name: str
    queue: str
    count: int
    first_enqueued_at: datetime.datetime

    @property
    def dead_letter_at(self) -> datetime.datetime:
        """When the first of them is dead-lettered if no worker knows the name by then."""
        return dead_letter_at(self.first_enqueued_at)


def waiting(using: str = "default", queues: list[str] | None = None) -> list[UnknownName]:
    """The job names handed back as unknown that still have READY jobs, per queue.

    One grouped query over the READY jobs (the partial claim index), as the queue counts do.
    """
    jobs = Job.objects.using(using).filter(status=JobStatus.READY, last_error__startswith=HANDED_BACK_PREFIX)
    if queues:
        jobs = jobs.filter(queue__in=queues)
    rows = jobs.values_list("name", "queue").annotate(count=Count("*"), first=Min("enqueued_at")).order_by()
    return sorted((UnknownName(*row) for row in rows), key=lambda row: (row.queue, row.name))
