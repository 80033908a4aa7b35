"""Refuse new jobs that would wait for themselves: through their batch, whose callbacks wait
for them, and the jobs they wait for (``after=``), which wait for one of those callbacks."""

from __future__ import annotations

import logging

from ..exceptions import DependencyCycle
from ..models import Batch, Blocked, Job, JobDependency, JobStatus
from ..observability import log_fields

logger = logging.getLogger("django_dbjobs")

#: Jobs met before the search gives up; the jobs are enqueued, and dbjobs_status reports
#: the cycle if there is one.
MAX_SEARCHED = 10_000
#: Ids per statement: well under SQLite's limit of bound parameters.
CHUNK = 500
CALLBACKS = ("on_success", "on_failure", "on_complete")


def refuse(using: str, batch_id: str | None, upstream: list[str], many: bool = False) -> None:
    """Raise DependencyCycle, naming the cycle, if new jobs of batch `batch_id` that wait for
    the `upstream` jobs would wait for themselves. Reads only: call it before writing.

    Searched backwards from the batch's callbacks (they wait for the new jobs): the jobs
    waiting for them, the callbacks of those jobs' open batches, and so on, until one of
    `upstream` is met. Most callbacks have no job waiting for them: two statements.
    """
    if batch_id is None or not upstream:
        return
    wanted = set(upstream)
    # How each job met waits for the new jobs: ("job", the job it waits for), or
    # ("callback", its batch, its kind, the batch's job on the way; None: the new jobs).
    step: dict[str, tuple] = {}
    frontier = _callbacks(using, {batch_id: None}, step)
    while frontier:
        met = [pk for pk in frontier if pk in wanted]
        if met:
            raise DependencyCycle(_message(batch_id, min(met), step, many))
        if len(step) > MAX_SEARCHED:
            logger.warning(
                "Dependency cycle search gave up batch=%s jobs=%s",
                batch_id,
                len(step),
                extra=log_fields.for_count(len(step)),
            )
            return
        frontier = _waiting_for(using, frontier, step)


def _callbacks(using: str, members: dict[str, str | None], step: dict[str, tuple]) -> list[str]:
    """The callbacks not met yet of the open batches among `members` (batch id: its job on the way)."""
    found = []
    for chunk in _chunks(sorted(members)):
        batches = Batch.objects.using(using).filter(pk__in=chunk, finished_at__isnull=True)
        for pk, *callbacks in batches.order_by("pk").values_list("pk", *CALLBACKS):
            for kind, callback in zip(CALLBACKS, callbacks, strict=True):
                if callback and callback not in step:
                    step[callback] = ("callback", pk, kind, members[pk])
                    found.append(callback)
    return found


def _waiting_for(using: str, frontier: list[str], step: dict[str, tuple]) -> list[str]:
    """The jobs not met yet that still wait for one of `frontier`, and the callbacks of their batches."""
    edges = []
    for chunk in _chunks(sorted(frontier)):
        rows = JobDependency.objects.using(using).filter(upstream__in=chunk, counted=False)
        edges += rows.values_list("job_id", "upstream")
    waiting: dict[str, str | None] = {}
    jobs = Job._base_manager.using(using).filter(status=JobStatus.READY, blocked=Blocked.AFTER)
    for chunk in _chunks(sorted({job for job, _upstream in edges if job not in step})):
        waiting.update(jobs.filter(pk__in=chunk).values_list("pk", "batch_id"))
    found, members = [], {}
    for job, upstream in sorted(edges):
        if job in waiting and job not in step:
            step[job] = ("job", upstream)
            found.append(job)
            if waiting[job] is not None:
                members.setdefault(waiting[job], job)
    return found + (_callbacks(using, members, step) if members else [])


def _message(batch_id: str, met: str, step: dict[str, tuple], many: bool) -> str:
    """The cycle, from the job `met` (waited for by the new jobs) back to their batch."""
    links, pk, member_of = [], met, None
    while pk is not None:
        how = step[pk]
        if how[0] == "job":
            links.append(f"job {pk}" + (f" (of batch {member_of})" if member_of else ""))
            pk, member_of = how[1], None
        else:
            _callback, batch, kind, member = how
            links.append(f"job {pk} (the {kind} callback of batch {batch}, which waits for all of its jobs)")
            pk, member_of = member, batch
    subject = "These jobs would wait for themselves" if many else "This job would wait for itself"
    return (
        f"{subject}, never run, and batch {batch_id} would never finish: "
        f"{'they join' if many else 'it joins'} batch {batch_id} and {'wait' if many else 'waits'} "
        f"for {', which waits for '.join(links)}."
    )


def _chunks(items: list) -> list[list]:
    return [items[start : start + CHUNK] for start in range(0, len(items), CHUNK)]
