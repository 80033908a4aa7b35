"""W13, enqueue_many() at the sizes users call it with: calls of 100 and of 1,000 jobs,
each beside the raw multi-row INSERT of the same size (``--only W13``).

Each enqueue_many() call is its own transaction, as it is in a view; the raw limit's
INSERT is its own (autocommit), one per call, the same rows through the same driver
(bench/raw.py). The two take turns call by call, each timed alone: on a shared machine
a slow moment (another process's disk flush) falls on both, not on one run of either.
"""

import time

from django.db import connection

from bench import jobs, raw
from bench.run import summarise
from django_dbjobs import enqueue_many

#: Jobs per call measured, and the jobs of one run (in calls of that size) for each.
SIZES = (100, 1000)
JOBS = 20000


def taking_turns_by_call(count: int, size: int) -> tuple[float, float]:
    """`count` jobs of each in calls of `size`, a raw INSERT then an enqueue_many() call in
    turn; return (raw jobs/s, enqueue_many() jobs/s)."""
    arguments = [()] * size
    calls = max(count // size, 1)
    raw_time = ours_time = 0.0
    with connection.cursor() as cursor:
        for _ in range(calls):
            started = time.perf_counter()
            raw.bulk_insert(cursor, size)
            between = time.perf_counter()
            enqueue_many(jobs.noop, arguments)
            ours_time += time.perf_counter() - between
            raw_time += between - started
    return calls * size / raw_time, calls * size / ours_time


def w13_all(runs: int, scale: float, taking_turns) -> dict:
    """Per size, `runs` runs of taking_turns_by_call() on an emptied table."""
    results = {}
    for size in SIZES:
        count = max(int(JOBS * scale), size * 2)
        (pairs,) = taking_turns(runs, lambda count=count, size=size: taking_turns_by_call(count, size))
        raw_bulk, many = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
        results[f"W13 raw multi-row INSERT x{size} (limit)"] = summarise(raw_bulk)
        results[f"W13 enqueue_many() x{size}"] = {**summarise(many), "limit": summarise(raw_bulk)["median"]}
    return results
