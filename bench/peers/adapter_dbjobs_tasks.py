"""django-dbjobs through Django's Tasks framework (task.enqueue(), as django-tasks-db is used):
the same worker as adapter_dbjobs. django.tasks has no bulk enqueue."""

import os

os.environ["DJANGO_SETTINGS_MODULE"] = "dbjobs_tasks_settings"

import adapter_dbjobs  # noqa: E402
import django_tasks_jobs  # noqa: E402

install, reset, pending = adapter_dbjobs.install, adapter_dbjobs.reset, adapter_dbjobs.pending


single = django_tasks_jobs.single


def bulk(count: int, chunk: int) -> None:
    return None  # django.tasks has no bulk API


enqueue_now = django_tasks_jobs.enqueue_now


def worker_commands() -> list[list[str]]:
    return adapter_dbjobs.worker_commands()
