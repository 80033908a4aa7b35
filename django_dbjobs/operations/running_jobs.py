"""The running jobs and their progress, for dbjobs_status: the longest running first, at most 50.

One query on the running-jobs index (a partial index: only RUNNING rows are in it),
reading a handful of columns; how many more run comes from the queue counts the
status read anyway.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from ..models import Job
from ..models.progress import Progress
from .long_transactions import age_text

#: Running jobs dbjobs_status names, at most; the rest are counted.
MAX_SHOWN = 50


@dataclass(frozen=True)
class RunningJob:
    id: str
    name: str
    queue: str
    worker: str | None
    #: When this attempt started (the claim), by the database clock.
    started_at: datetime.datetime | None
    progress: Progress | None


@dataclass
class RunningJobs:
    """The longest running jobs, and how many others run (`more`)."""

    jobs: list[RunningJob] = field(default_factory=list)
    more: int = 0

    def as_json(self, now: datetime.datetime) -> dict[str, Any]:
        return {"jobs": [_job_json(job, now) for job in self.jobs], "more": self.more}

    def lines(self, now: datetime.datetime) -> list[str]:
        """A short section for dbjobs_status's table, only when running jobs report progress."""
        reporting = [job for job in self.jobs if job.progress is not None]
        if not reporting:
            return []
        text = [
            f"Running jobs reporting progress ({len(reporting)} of {len(self.jobs) + self.more} running):"
        ]
        for job in reporting:
            progress = job.progress
            assert progress is not None
            running = "" if job.started_at is None else f", running {age_text(_seconds(now, job.started_at))}"
            note = f"  {progress.note}" if progress.note else ""
            text.append(f"  {job.id}  {job.name} ({job.queue}{running}): {_done_text(progress)}{note}")
        return text


def read_running_jobs(using: str, queues: list[str] | None, running: int) -> RunningJobs:
    """The longest running jobs (of `queues`, or all), at most MAX_SHOWN; `running`: how many run."""
    rows = Job.objects.using(using).running()
    if queues:
        rows = rows.filter(queue__in=queues)
    columns = ("id", "name", "queue", "worker", "last_attempted_at", "progress_state")
    jobs = [
        RunningJob(pk, name, queue, worker, started, Progress.from_record(state))
        for pk, name, queue, worker, started, state in rows.order_by("last_attempted_at", "id").values_list(
            *columns
        )[:MAX_SHOWN]
    ]
    return RunningJobs(jobs, max(running - len(jobs), 0))


def _job_json(job: RunningJob, now: datetime.datetime) -> dict[str, Any]:
    progress = job.progress
    return {
        "id": job.id,
        "name": job.name,
        "queue": job.queue,
        "worker": job.worker,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "running_seconds": None if job.started_at is None else round(_seconds(now, job.started_at), 3),
        "progress": None
        if progress is None
        else {
            "done": progress.done,
            "total": progress.total,
            "percent": progress.percent,
            "note": progress.note,
            "rate": None if progress.rate is None else round(progress.rate, 3),
            "eta_seconds": None if progress.eta is None else round(progress.eta, 1),
            "at": progress.at.isoformat() if progress.at else None,
        },
    }


def _done_text(progress: Progress) -> str:
    done = f"{progress.done:g}" + (
        "" if progress.total is None else f"/{progress.total:g} ({progress.percent}%)"
    )
    if progress.rate:
        done += f", {progress.rate:.3g}/s"
    if progress.eta is not None:
        done += f", {age_text(progress.eta)} left"
    return done


def _seconds(now: datetime.datetime, then: datetime.datetime) -> float:
    return max((now - then).total_seconds(), 0.0)
