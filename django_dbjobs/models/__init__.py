from .job import Isolation, Job, JobQuerySet, JobStatus
from .schedule import DefinedIn, MissedRuns, Schedule, ScheduleQuerySet
from .schedule_tick import ScheduleTick
from .worker import WorkerProcess

__all__ = [
    "DefinedIn",
    "Isolation",
    "Job",
    "JobQuerySet",
    "JobStatus",
    "MissedRuns",
    "Schedule",
    "ScheduleQuerySet",
    "ScheduleTick",
    "WorkerProcess",
]
