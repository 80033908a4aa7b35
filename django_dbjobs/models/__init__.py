from .job import Isolation, Job, JobQuerySet, JobStatus
from .worker import WorkerProcess

__all__ = ["Isolation", "Job", "JobQuerySet", "JobStatus", "WorkerProcess"]
