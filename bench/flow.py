"""W6, flow control: the claim with 10,000 jobs waiting for a concurrency slot ahead of free
ones, one admission pass over many keys at their limit, and a drain of keyed jobs."""

import statistics
import time

from bench import jobs
from bench.run import summarise
from django_dbjobs import enqueue_many
from django_dbjobs.flow import admission
from django_dbjobs.models import Job, JobStatus

#: Claims timed per run, each of CLAIM_SIZE jobs.
CLAIMS = 100
CLAIM_SIZE = 10


def claim_times(blocked: int, free: int) -> float:
    """Median µs of a 10-job claim with `free` unkeyed jobs behind `blocked` jobs waiting for a slot.

    The waiting jobs have a higher priority, so they come first in claim order.
    """
    if blocked:
        enqueue_many(jobs.keyed_noop, [("hot",)] * blocked, priority=10)
    enqueue_many(jobs.noop, [()] * free)
    times = []
    for _ in range(CLAIMS):
        started = time.perf_counter()
        claimed = Job.objects.claim("bench", limit=CLAIM_SIZE)
        times.append((time.perf_counter() - started) * 1e6)
        assert len(claimed) == CLAIM_SIZE and all(j.concurrency_key is None for j in claimed)
    return statistics.median(times)


def admission_pass(waiting: int, keys: int) -> float:
    """Ms of one look at every key (admissible_keys()) with `waiting` jobs over `keys` keys at their limit."""
    enqueue_many(jobs.keyed_noop, [(f"k{n % keys}",) for n in range(waiting)])
    admission.admit("default")  # every key takes its 2 slots: now all are at their limit
    Job.objects.filter(concurrency_key__isnull=False, blocked="").update(status=JobStatus.RUNNING, worker="x")
    times = []
    for _ in range(20):
        started = time.perf_counter()
        found = admission.admissible_keys("default")
        times.append((time.perf_counter() - started) * 1e3)
        assert found == []
    return statistics.median(times)


def w6_all(runs: int, scale: float, taking_turns) -> dict:
    blocked = max(int(10_000 * scale), 100)
    free = CLAIMS * CLAIM_SIZE
    plain, behind = taking_turns(runs, lambda: claim_times(0, free), lambda: claim_times(blocked, free))
    results = {
        "W6 claim of 10, nothing waiting ahead": {**summarise(plain), "unit": "µs"},
        f"W6 claim of 10, {blocked:,} waiting for a slot ahead": {
            **summarise(behind),
            "unit": "µs",
            "limit": statistics.median(plain),
        },
    }
    passes = taking_turns(runs, lambda: admission_pass(blocked, max(blocked // 10, 1)))[0]
    results[f"W6 admission look, {blocked:,} waiting over {max(blocked // 10, 1):,} full keys"] = {
        **summarise(passes),
        "unit": "ms",
    }
    return results
