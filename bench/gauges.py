"""How fast the database gauges' view answers a scrape on a table of a million jobs.

    .venv/bin/python bench/gauges.py                                   # PostgreSQL, 1,000,000 jobs
    .venv/bin/python bench/gauges.py --database mysql://root@127.0.0.1:3306/dbjobs_gauges_bench
    .venv/bin/python bench/gauges.py --database sqlite:////tmp/gauges-bench.sqlite3

Uses bench/admin.py's table (7 days of a realistic mix: ~95 % finished, 3 % FAILED, 2 %
READY, 300 RUNNING on four live workers, 6 queues, one paused; created if missing, reused
if it holds exactly that many rows), minus EXTRA rows of flow control put back at every
run: a rate-limited queue's backlog, concurrency keys at their limit, jobs waiting for
others, open batches. Then the view is requested --runs times after a warm-up, as a
scraper does (``Authorization: Bearer``, through django.test.Client: middleware and view,
no network). Printed: the median and slowest request, and each query of one request with
its time and plan (EXPLAIN ANALYZE on PostgreSQL, ANALYZE on MariaDB, EXPLAIN QUERY
PLAN on SQLite), so a scan of the finished jobs shows.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.admin import (  # noqa: E402
    add_workers_and_queues,
    configure,
    ensure_index,
    explain_prefix,
    fill,
    print_header,
    timed_loads,
    urlpatterns,
)

DEFAULT_DATABASE = "postgres://root@127.0.0.1:5432/dbjobs_gauges_bench"
URL = "/dbjobs/metrics"
TOKEN = "bench-gauges-token"
#: Flow-control rows: ids from "gauges-" up sort after every UUID, so they are found by a
#: range of the primary key and deleted again at the next run.
RATED, KEYS, WAITING_PER_KEY, AFTER, BATCHES = 2000, 100, 18, 500, 10
EXTRA = RATED + KEYS * (2 + WAITING_PER_KEY) + AFTER + BATCHES
#: The live jobs by queue, state and due time (db.ActiveJobsIndex): the gauges' grouped
#: query over the ready and running jobs reads it alone; --without-active-index drops it.
ACTIVE_INDEX = "dbjobs_job_active_idx"


def set_active_index(present: bool) -> None:
    """Make or drop the live jobs' index, then refresh the statistics the planner reads."""
    from django.db import connection

    from django_dbjobs.models import Job

    with connection.cursor() as cursor:
        exists = ACTIVE_INDEX in connection.introspection.get_constraints(cursor, Job._meta.db_table)
    if exists == present:
        return
    index = next(index for index in Job._meta.indexes if index.name == ACTIVE_INDEX)
    with connection.schema_editor() as editor:
        (editor.add_index if present else editor.remove_index)(Job, index)
    with connection.cursor() as cursor:
        cursor.execute(
            {"sqlite": "ANALYZE", "mysql": "ANALYZE TABLE django_dbjobs_job"}.get(
                connection.vendor, "ANALYZE django_dbjobs_job"
            )
        )
        if connection.vendor == "mysql":
            cursor.fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", default=DEFAULT_DATABASE, help="Database URL (django-environ syntax).")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="Rows in the job table, EXTRA included.")
    parser.add_argument("--runs", type=int, default=20, help="Timed requests, after one warm-up.")
    parser.add_argument("--refill", action="store_true", help="Fill the job table again even if it is full.")
    parser.add_argument(
        "--without-active-index",
        action="store_true",
        help=f"Measure without {ACTIVE_INDEX} (dropped for the run, made again after it).",
    )
    options = parser.parse_args()

    configure(options.database)
    from django.test.utils import override_settings
    from django.urls import path

    from django_dbjobs.observability.gauges_view import metrics_view

    urlpatterns.append(path(URL.lstrip("/"), metrics_view))
    override_settings(DBJOBS_METRICS_TOKEN=TOKEN, DBJOBS_QUEUE_LIMITS={"webhooks": {"rate": "50/m"}}).enable()
    ensure_index()
    remove_flow_rows()
    filled = fill(options.jobs - EXTRA, options.refill)
    add_workers_and_queues()
    add_flow_rows()
    print_header(filled)
    started = time.perf_counter()
    set_active_index(True)  # dropped by an earlier run that was killed, or by an older table
    print(f"{ACTIVE_INDEX} in place ({time.perf_counter() - started:.1f} s).")
    if options.without_active_index:
        set_active_index(False)
    try:
        measure(options.runs)
    finally:
        set_active_index(True)


def measure(runs: int) -> None:
    """Request the view `runs` times after a warm-up; print the times and one request's plans."""
    from django.db import connection
    from django.test import Client

    client = Client(headers={"Authorization": f"Bearer {TOKEN}"})
    loads, response = timed_loads(client, URL, runs, "gauges")
    times = [elapsed for elapsed, _queries in loads]
    lines = response.content.decode().count("\n")
    print(
        f"\nGauges view on {connection.vendor}: median {statistics.median(times):.1f} ms, "
        f"min {min(times):.1f}, max {max(times):.1f} ({runs} requests; "
        f"{len(loads[-1][1])} queries, {lines} lines of text)"
    )
    explain(sorted(loads)[len(loads) // 2][1])


def remove_flow_rows() -> None:
    from django_dbjobs.models import Batch, Job, RateSlot

    Job.objects.filter(pk__gte="gauges-").delete()
    Batch.objects.filter(pk__gte="gauges-").delete()
    RateSlot.objects.filter(queue="webhooks").delete()


def add_flow_rows() -> None:
    """EXTRA rows: webhooks' backlog (rate-limited), keys at their limit, jobs waiting for
    others (each for a job of the backlog), open batches of a job each; and the rate slots
    of 30 starts of webhooks."""
    from django.utils import timezone

    from django_dbjobs.flow.rates import Rate, RateLimitedClaims
    from django_dbjobs.models import Batch, Blocked, Job, JobDependency, JobStatus

    now = timezone.now()
    ids = (f"gauges-{number:07}" for number in range(EXTRA))
    rows = []

    def row(**fields) -> None:
        rows.append(Job(id=next(ids), run_at=now - datetime.timedelta(seconds=30), **fields))

    for _ in range(RATED):
        row(name="webhooks.tasks.deliver", queue="webhooks", blocked=Blocked.RATE)
    for key in range(KEYS):
        keyed = {"concurrency_key": f"tenant:{key}", "concurrency_limit": 2}
        for _ in range(2):
            row(name="crm.tasks.sync_tenant", status=JobStatus.RUNNING, worker="web-1:1201:0a1b2c3d", **keyed)
        for _ in range(WAITING_PER_KEY):
            row(name="crm.tasks.sync_tenant", blocked=Blocked.CONCURRENCY, **keyed)
    for _ in range(AFTER):
        row(name="reports.tasks.merge", queue="reports", blocked=Blocked.AFTER, waiting_for=1)
    # Each waits for one job of webhooks' backlog, still to run.
    edges = [
        JobDependency(job_id=waiting.pk, upstream=upstream.pk)
        for waiting, upstream in zip(rows[-AFTER:], rows, strict=False)
    ]
    batches = Batch.objects.bulk_create(
        [Batch(id=f"gauges-batch-{number:03}", total=1) for number in range(BATCHES)]
    )
    for opened in batches:
        row(name="reports.tasks.generate_invoice_pdf", queue="reports", batch=opened)
    Job.objects.bulk_create(rows, batch_size=1000)
    JobDependency.objects.bulk_create(edges, batch_size=1000)
    # Rate slots as 30 starts of webhooks in the last minute leave them (then back to READY).
    started = RateLimitedClaims("bench", "default").claim("webhooks", Rate(50, 60), 30, include_waiting=True)
    Job.objects.filter(pk__in=[job.pk for job in started]).update(
        status=JobStatus.READY, worker=None, blocked=Blocked.RATE
    )


def explain(queries: list) -> None:
    """Each query of one request, with its time and plan."""
    from django.db import connection

    prefix = explain_prefix()
    for elapsed, sql, params in queries:
        print(f"\n-- {elapsed:.2f} ms: {sql[:400]}")
        if not sql.lstrip().upper().startswith("SELECT") or "FROM" not in sql.upper():
            continue
        with connection.cursor() as cursor:
            cursor.execute(prefix + sql, params)
            plan = cursor.fetchall()
        for line in plan:
            print("   ", " | ".join("" if value is None else str(value) for value in line))


if __name__ == "__main__":
    main()
