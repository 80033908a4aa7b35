from .job import Job, JobQuerySet, JobStatus
from .worker import WorkerProcess

__all__ = ["Job", "JobQuerySet", "JobStatus", "WorkerProcess"]
