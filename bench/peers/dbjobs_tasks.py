"""The benchmark's tasks for django-dbjobs through Django's Tasks framework (its task.enqueue())."""

import os
import time

from django.tasks import task


@task()
def noop(arg: str) -> None:
    return None


@task()
def stamp(arg: str) -> None:
    with open(os.environ["BENCH_STAMPS"], "a") as out:
        out.write(f"{arg} {time.time()}\n")
