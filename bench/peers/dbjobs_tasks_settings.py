"""django-dbjobs as a backend of Django's Tasks framework, in the side-by-side benchmark."""

from dbjobs_settings import *  # noqa: F403

TASKS = {"default": {"BACKEND": "django_dbjobs.backend.DatabaseBackend"}}
DBJOBS_JOB_MODULES = ["django_tasks_jobs"]
