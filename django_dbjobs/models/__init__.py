"""The tables (jobs, dead letters, queues, workers, schedules, workflows, flow limits) and their querysets."""

from .admin_pages import FailureGroup, Overview
from .failed_job import FailedJob, FailedJobQuerySet, RetryReport
from .flow import ConcurrencyKey, RateSlot
from .job import Blocked, Isolation, Job, JobQuerySet, JobStatus
from .queue import Queue, QueueQuerySet
from .schedule import DefinedIn, MissedRuns, Schedule, ScheduleQuerySet
from .schedule_tick import ScheduleTick
from .worker import WorkerProcess
from .workflow import Batch, JobDependency

__all__ = [
    "Batch",
    "Blocked",
    "ConcurrencyKey",
    "DefinedIn",
    "FailedJob",
    "FailedJobQuerySet",
    "FailureGroup",
    "Isolation",
    "Job",
    "JobDependency",
    "JobQuerySet",
    "JobStatus",
    "MissedRuns",
    "Overview",
    "Queue",
    "QueueQuerySet",
    "RateSlot",
    "RetryReport",
    "Schedule",
    "ScheduleQuerySet",
    "ScheduleTick",
    "WorkerProcess",
]
