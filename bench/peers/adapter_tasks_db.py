"""django-tasks-db in the side-by-side benchmark (see harness.py): Django's task.enqueue(),
and two db_worker processes at their defaults (it runs one task at a time per process,
and has no bulk enqueue)."""

import os
import sys

os.environ["DJANGO_SETTINGS_MODULE"] = "tasks_db_settings"
import django  # noqa: E402

django.setup()

import django_tasks_jobs  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402


def install() -> None:
    call_command("migrate", verbosity=0)


def reset() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE django_tasks_database_dbtaskresult")


single = django_tasks_jobs.single


def bulk(count: int, chunk: int) -> None:
    return None  # no bulk API


enqueue_now = django_tasks_jobs.enqueue_now


def pending() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE status IN ('READY', 'RUNNING')"
        )
        return cursor.fetchone()[0]


def worker_commands() -> list[list[str]]:
    return [[sys.executable, "-m", "django", "db_worker", "-v", "0"]] * 2
