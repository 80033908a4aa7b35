"""django-dbjobs through Django's Tasks framework (task.enqueue(), as django-tasks-db is used):
the same worker as adapter_dbjobs. django.tasks has no bulk enqueue."""

import os
import time

os.environ["DJANGO_SETTINGS_MODULE"] = "dbjobs_tasks_settings"

import adapter_dbjobs  # noqa: E402
import dbjobs_tasks  # noqa: E402

install, reset, pending = adapter_dbjobs.install, adapter_dbjobs.reset, adapter_dbjobs.pending


def single(count: int) -> float:
    started = time.perf_counter()
    for i in range(count):
        dbjobs_tasks.noop.enqueue(str(i))
    return time.perf_counter() - started


def bulk(count: int, chunk: int) -> None:
    return None  # django.tasks has no bulk API


def enqueue_now(arg: str) -> None:
    dbjobs_tasks.stamp.enqueue(arg)


def worker_commands() -> list[list[str]]:
    return adapter_dbjobs.worker_commands()
