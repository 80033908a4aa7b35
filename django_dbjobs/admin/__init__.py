"""The django_dbjobs admin: jobs, dead letters, schedules, workers, queues and an overview."""

from . import failed_jobs, jobs, queues, schedules, workers

__all__ = ["failed_jobs", "jobs", "queues", "schedules", "workers"]
