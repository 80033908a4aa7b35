"""One round of bench/growth.py, in a process of its own: every figure once, on the table it is given.

Per job, in µs: enqueue(), a claim of 10, the completion of 10, and a retention batch
(``delete_batch()`` of 1,000 successes past a day's keep time, the oldest first, as a worker
prunes; RETENTION_BATCHES of them). Per call, in ms, each the median of READS after a
warm-up: ``read_status()`` as ``dbjobs_status --json`` reads it, the admin's job list
(its first page, and filtered on the ready jobs) loaded by a superuser through
django.test.Client, and one scrape of the gauges' view (observability/gauges_view.py).
Before its reads the empty table is given as many ready jobs as the big one holds.
"""

from __future__ import annotations

import statistics
import time

#: Seconds a success is kept: the fill spreads them over seven days (growth_fill.py).
KEEP = 86400.0
RETENTION_BATCHES = 3
#: The empty table's successes past KEEP, made before its retention batches.
EMPTY_TABLE_OLD_ROWS = 7 * RETENTION_BATCHES * 1000
READS = 5
#: The empty table's ready jobs for its claims (then as many as the big table's, for its reads).
EMPTY_TABLE_READY = 5000
#: The figures in ms per call; the others are µs per job.
MS_FIGURES = ("dbjobs_status", "admin job list", "admin job list, READY", "gauges scrape")


def run_round(kind: str, backlog: int = 0) -> dict:
    """Measure a round on the table of `kind` ("empty" or "big"): its figures and rows deleted.

    The empty table's reads see `backlog` ready jobs, as many as the big table holds: the
    status and the gauges count the ready jobs, and the figures compare the finished rows' cost.
    """
    if kind == "empty":
        empty_table()
    vacuum()
    figures = job_costs()
    if kind == "empty":
        add_backlog(backlog)
    figures.update(reads())
    if kind == "empty":
        add_old_rows()
    deleted, figures["retention (1,000 a batch)"] = retention()
    return {"figures": figures, "deleted": deleted}


def empty_table() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE django_dbjobs_job")
        cursor.execute("ANALYZE django_dbjobs_job")
    from bench import jobs
    from django_dbjobs import enqueue_many

    enqueue_many(jobs.noop, [()] * EMPTY_TABLE_READY)


def add_backlog(backlog: int) -> None:
    """Bring the empty table's ready jobs up to `backlog`, then vacuum it as the big one was."""
    from django.db import connection

    from bench.growth_fill import READY, insert_rows
    from django_dbjobs.models import Job, JobStatus

    missing = backlog - Job.objects.filter(status=JobStatus.READY).count()
    if missing > 0:
        with connection.cursor() as cursor:
            insert_rows(cursor, READY, missing, "1 hour")
        vacuum()


def add_old_rows() -> None:
    """Give the empty table successes to prune: six sevenths of them past KEEP."""
    from django.db import connection

    from bench.growth_fill import FINISHED, FINISHED_SPAN, insert_rows

    with connection.cursor() as cursor:
        insert_rows(cursor, FINISHED, EMPTY_TABLE_OLD_ROWS, FINISHED_SPAN)
        cursor.execute("ANALYZE django_dbjobs_job")


def vacuum() -> None:
    """Both tables start a round as autovacuum leaves them: the claim index without the
    entries of jobs claimed since (INDEX_CLEANUP ON: PostgreSQL 14+ skips the indexes when
    few pages have dead rows, and those entries would pile up at the head of the claim
    index from one round to the next)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM (INDEX_CLEANUP ON, ANALYZE) django_dbjobs_job")


def job_costs() -> dict:
    """µs per job of enqueue(), of claims of 10 and of completions of 10."""
    from bench import jobs
    from django_dbjobs import enqueue
    from django_dbjobs.models import Job

    figures = {}
    started = time.perf_counter()
    for _ in range(2000):
        enqueue(jobs.noop)
    figures["enqueue()"] = (time.perf_counter() - started) / 2000 * 1e6
    claiming = finishing = 0.0
    claimed = 0
    for _ in range(300):
        started = time.perf_counter()
        batch = Job.objects.claim("bench-growth", limit=10)
        middle = time.perf_counter()
        Job.objects.finish_successes("bench-growth", [(job, None) for job in batch])
        claiming += middle - started
        finishing += time.perf_counter() - middle
        claimed += len(batch)
    figures["claim (10 a claim)"] = claiming / claimed * 1e6
    figures["completion (10 at once)"] = finishing / claimed * 1e6
    return figures


def reads() -> dict:
    """ms per call of the status, the admin's job list and a gauges scrape."""
    from django.contrib.auth.models import User
    from django.test import Client

    from bench.admin import timed_loads
    from django_dbjobs.operations.long_transactions import DEFAULT_LONG_TRANSACTION
    from django_dbjobs.operations.status import read_status

    def status() -> None:
        read_status(with_causes=True, long_transaction_after=DEFAULT_LONG_TRANSACTION)

    figures = {"dbjobs_status": median_ms(status)}
    admin, _ = User.objects.get_or_create(
        username="bench-growth", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(admin)
    pages = {
        "admin job list": "/admin/django_dbjobs/job/",
        "admin job list, READY": "/admin/django_dbjobs/job/?status__exact=READY",
        "gauges scrape": "/dbjobs/metrics",
    }
    for name, url in pages.items():
        loads, _response = timed_loads(client, url, READS, name)
        figures[name] = statistics.median(elapsed for elapsed, _queries in loads)
    return figures


def median_ms(call) -> float:
    """The median time of READS calls of `call` after a warm-up, in ms."""
    call()
    times = []
    for _ in range(READS):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def retention() -> tuple[int, float]:
    """Delete RETENTION_BATCHES batches of successes past KEEP: (rows deleted, µs per row)."""
    from django_dbjobs.models import JobStatus
    from django_dbjobs.operations.retention import BATCH_SIZE, delete_batch

    deleted = 0
    started = time.perf_counter()
    for _ in range(RETENTION_BATCHES):
        deleted += delete_batch(JobStatus.SUCCESSFUL, KEEP, batch_size=BATCH_SIZE)
    elapsed = time.perf_counter() - started
    if deleted < RETENTION_BATCHES * BATCH_SIZE:
        raise SystemExit(f"Only {deleted} successes past their keep time: fill the table again (--refill).")
    return deleted, elapsed / deleted * 1e6
