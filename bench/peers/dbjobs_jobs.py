"""The benchmark's jobs for django-dbjobs."""

import os
import time

from django_dbjobs import job


@job
def noop(arg):
    return None


@job
def stamp(arg):
    with open(os.environ["BENCH_STAMPS"], "a") as out:
        out.write(f"{arg} {time.time()}\n")
