"""How fast `dbjobs_status` and one retention batch are on a big job table.

    .venv/bin/python bench/ops.py                                     # PostgreSQL, 1,000,000 jobs
    .venv/bin/python bench/ops.py --database mysql://root@127.0.0.1:3306/dbjobs_admin_bench --jobs 200000

Uses bench/admin.py's table (7 days of a realistic mix, ~95 % finished; created if
missing, reused if it holds exactly --jobs rows). Times `manage.py dbjobs_status --json`
in process (every query it runs, the JSON rendering) --runs times after a warm-up, then
deletes --batches retention batches (1,000 successes older than --older-than days each,
as a worker does) and times each. The batches delete rows: the next run refills.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.admin import DEFAULT_DATABASE, add_workers_and_queues, configure, ensure_index, fill  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", default=DEFAULT_DATABASE, help="Database URL (django-environ syntax).")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="Rows in the job table.")
    parser.add_argument("--runs", type=int, default=10, help="Timed dbjobs_status runs, after one warm-up.")
    parser.add_argument("--batches", type=int, default=5, help="Retention batches to delete and time.")
    parser.add_argument("--older-than", type=float, default=3.0, help="Days: successes older than this go.")
    parser.add_argument("--refill", action="store_true", help="Fill the job table again even if it is full.")
    options = parser.parse_args()

    configure(options.database)
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_dbjobs.models import Job, JobStatus
    from django_dbjobs.operations import retention

    ensure_index()
    fill(options.jobs, options.refill)
    add_workers_and_queues()
    print(f"{connection.vendor} {connection.pg_version if connection.vendor == 'postgresql' else ''}".strip())
    print(f"{Job.objects.count():,} jobs")

    def status() -> None:
        call_command("dbjobs_status", "--json", stdout=io.StringIO())

    status()
    timings = []
    for _ in range(options.runs):
        started = time.perf_counter()
        status()
        timings.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as queries:
        status()
    slowest = max(queries.captured_queries, key=lambda q: float(q["time"]))
    print(
        f"dbjobs_status --json: median {statistics.median(timings):.1f} ms, max {max(timings):.1f} ms, "
        f"{len(queries.captured_queries)} queries, slowest {float(slowest['time']) * 1000:.1f} ms:"
    )
    print(f"    {slowest['sql'][:300]}")

    older = options.older_than * 86400
    eligible = retention.old_jobs(JobStatus.SUCCESSFUL, older).count()
    print(f"successes older than {options.older_than:g} days: {eligible:,}")
    batches = []
    for _ in range(options.batches):
        started = time.perf_counter()
        deleted = retention.delete_batch(JobStatus.SUCCESSFUL, older)
        batches.append(((time.perf_counter() - started) * 1000, deleted))
    for number, (ms, deleted) in enumerate(batches, 1):
        print(f"retention batch {number}: {deleted} rows in {ms:.1f} ms")
    print(f"retention batch median: {statistics.median(ms for ms, _ in batches):.1f} ms per 1,000 rows")


if __name__ == "__main__":
    main()
