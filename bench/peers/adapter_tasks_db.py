"""django-tasks-db in the side-by-side benchmark (see harness.py): Django's task.enqueue(),
and two db_worker processes at their defaults (it runs one task at a time per process,
and has no bulk enqueue)."""

import os
import sys
import time

os.environ["DJANGO_SETTINGS_MODULE"] = "tasks_db_settings"
import django  # noqa: E402

django.setup()

import tasks_db_jobs  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402


def install() -> None:
    call_command("migrate", verbosity=0)


def reset() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE django_tasks_database_dbtaskresult")


def single(count: int) -> float:
    started = time.perf_counter()
    for i in range(count):
        tasks_db_jobs.noop.enqueue(str(i))
    return time.perf_counter() - started


def bulk(count: int, chunk: int) -> None:
    return None  # no bulk API


def enqueue_now(arg: str) -> None:
    tasks_db_jobs.stamp.enqueue(arg)


def pending() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE status IN ('READY', 'RUNNING')"
        )
        return cursor.fetchone()[0]


def worker_commands() -> list[list[str]]:
    return [[sys.executable, "-m", "django", "db_worker", "-v", "0"]] * 2
