"""The django_dbjobs admin: jobs, dead letters, batches, schedules, workers, queues and an overview."""

from . import batches, failed_jobs, jobs, queues, schedules, workers

__all__ = ["batches", "failed_jobs", "jobs", "queues", "schedules", "workers"]
