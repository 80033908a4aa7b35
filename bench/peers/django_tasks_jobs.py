"""The benchmark's tasks for Django's Tasks framework, and how they are enqueued: the same
for django-tasks-db and for django-dbjobs through its backend."""

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


def single(count: int) -> float:
    started = time.perf_counter()
    for i in range(count):
        noop.enqueue(str(i))
    return time.perf_counter() - started


def enqueue_now(arg: str) -> None:
    stamp.enqueue(arg)
