"""django-dbjobs in the side-by-side benchmark (see harness.py): run from the project's .venv."""

import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dbjobs_settings")
import django  # noqa: E402

django.setup()

import dbjobs_jobs  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from django_dbjobs import enqueue, enqueue_many  # noqa: E402


def install() -> None:
    call_command("migrate", verbosity=0)


def reset() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE django_dbjobs_job, django_dbjobs_workerprocess")


def single(count: int) -> float:
    started = time.perf_counter()
    for i in range(count):
        enqueue(dbjobs_jobs.noop, str(i))
    return time.perf_counter() - started


def bulk(count: int, chunk: int) -> float:
    started = time.perf_counter()
    for start in range(0, count, chunk):
        enqueue_many(dbjobs_jobs.noop, [(str(i),) for i in range(start, min(start + chunk, count))])
    return time.perf_counter() - started


def enqueue_now(arg: str) -> None:
    enqueue(dbjobs_jobs.stamp, arg)


def pending() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_dbjobs_job WHERE status IN ('READY', 'RUNNING')")
        return cursor.fetchone()[0]


def worker_commands() -> list[list[str]]:
    return [[sys.executable, "-m", "django", "run_jobs", "--concurrency", "2", "-v", "0"]]
