"""The django_dbjobs admin: jobs, dead letters and their causes, batches, schedules, workers, queues."""

from . import batches, failed_jobs, failure_groups, jobs, queues, schedules, workers

__all__ = ["batches", "failed_jobs", "failure_groups", "jobs", "queues", "schedules", "workers"]
