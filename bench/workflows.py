"""W7, workflows: a drain of 10,000 jobs in one batch next to the same jobs outside one,
by 4 worker processes finishing jobs of the batch at once (its counter row is shared)."""

import statistics

from django.core.management.color import no_style
from django.db import connection
from django.db.models import Max, Min

from bench import jobs
from bench.run import DEFAULTS, FASTEST, Workers, summarise
from django_dbjobs import batch, enqueue_many
from django_dbjobs.models import Batch, Job, JobDependency, JobStatus, WorkerProcess

#: 4 processes of the default worker (2 threads each): 8 threads finishing jobs of one batch.
FOUR_PROCESSES = {"processes": 4, "args": ["--concurrency", "2"], "env": {}}


def fresh_tables() -> None:
    tables = [model._meta.db_table for model in (Job, WorkerProcess, Batch, JobDependency)]
    connection.ops.execute_sql_flush(connection.ops.sql_flush(no_style(), tables))


def drain(count: int, in_batch: bool, setup: dict) -> float:
    """Drain `count` no-op jobs, in one batch or not; jobs/s from the first start to the last finish."""
    fresh_tables()
    if in_batch:
        with batch(description="bench", on_complete=jobs.batch_done) as opened:
            enqueue_many(jobs.noop, [()] * count)
    else:
        enqueue_many(jobs.noop, [()] * count)
    Workers(setup["processes"], setup["args"], setup["env"]).wait()
    members = Job.objects.filter(batch__isnull=False) if in_batch else Job.objects.all()
    left = members.exclude(status=JobStatus.SUCCESSFUL).count()
    if left:
        raise SystemExit(f"{left} jobs were not drained")
    if in_batch:
        opened.refresh_from_db()
        assert (opened.succeeded, opened.failed, opened.finished_at is not None) == (count, 0, True)
        assert Job.objects.filter(name="bench.jobs.batch_done").count() == 1
    span = members.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return count / max((span["last"] - span["first"]).total_seconds(), 1e-6)


def w7_all(runs: int, scale: float, taking_turns) -> dict:
    count = max(int(10_000 * scale), 200)
    results = {}
    setups = (
        ("defaults", DEFAULTS),
        ("fastest settings", FASTEST[connection.vendor]),
        ("4 processes x 2 threads", FOUR_PROCESSES),
    )
    for label, setup in setups:
        plain = lambda setup=setup: drain(count, False, setup)  # noqa: E731
        batched = lambda setup=setup: drain(count, True, setup)  # noqa: E731
        outside, inside = taking_turns(runs, plain, batched)
        results[f"W7 drain, {label}, no batch"] = summarise(outside)
        results[f"W7 drain, {label}, one batch of {count:,}"] = {
            **summarise(inside),
            "limit": statistics.median(outside),
        }
    return results
