"""Cost per job as the table grows (PostgreSQL): enqueue, claim and completion with an empty
table, then with 10 M finished and 1 M ready jobs.

    .venv/bin/python bench/growth.py                    # dbjobs_growth_bench, 10 M + 1 M rows
    .venv/bin/python bench/growth.py --finished 1000000 --ready 100000

Like bench/admin.py it keeps its database (created if missing, never a ``test_`` one): the
rows are made once by the server (``INSERT ... SELECT`` from ``generate_series``, in
chunks of a million), then ``VACUUM ANALYZE``d, and reused by the next run while the
table holds that many (``--refill`` makes them again). The finished jobs have ids in
enqueue order (UUIDv7) over the past seven days, as a busy queue leaves them; the ready
jobs are due, and claims take from them.

Each figure is microseconds per job, the median of ``--runs`` rounds:

- enqueue(): 2,000 calls, each its own transaction;
- claim: 300 claims of 10 jobs (``Job.objects.claim()``, the worker's statement);
- completion: those jobs finished 10 at a time (``finish_successes()``, the worker's
  success batch), fenced on owner and pickup.

The empty table's round has 5,000 ready jobs for its claims.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHUNK = 1_000_000
# One row per generate_series value `n`, made by the server. `age` spreads the rows over
# the past `span`; the id is a UUIDv7 of that time, in the order of n.
ROWS_SQL = """
INSERT INTO django_dbjobs_job (
    id, name, args, kwargs, queue, priority, status, run_at, attempts, max_attempts, worker,
    worker_ids, enqueued_at, started_at, last_attempted_at, finished_at, return_value, errors,
    last_error, isolation, pickups, blocked, has_dependents)
SELECT
    substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 1, 3) || '-8' || substr(r, 4, 3)
        || '-' || substr(r, 7, 12),
    'bench.jobs.noop', '[]', '{{}}', 'default', 0, %(status)s, at, %(attempts)s, 3, %(worker)s,
    %(worker_ids)s::jsonb, at, {finished}, {finished}, {finished}, NULL, '[]', '', '',
    %(attempts)s, '', FALSE
FROM (
    SELECT n, at,
        lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') AS h,
        md5(n::text || %(salt)s) AS r
    FROM (
        SELECT n, now() - %(span)s::interval + (%(span)s::interval * n / %(count)s) AS at
        FROM generate_series(%(first)s, %(last)s) AS n
    ) AS timed
) AS made
"""
FINISHED = {
    "status": "SUCCESSFUL",
    "attempts": 1,
    "worker": "bench-growth-worker",
    "worker_ids": '["bench-growth-worker"]',
    "salt": "f",
}
READY = {
    "status": "READY",
    "attempts": 0,
    "worker": None,
    "worker_ids": "[]",
    "salt": "r",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", default="postgres://root@127.0.0.1:5432/dbjobs_growth_bench")
    parser.add_argument("--finished", type=int, default=10_000_000)
    parser.add_argument("--ready", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--refill", action="store_true", help="Make the rows again even if present.")
    options = parser.parse_args()
    setup(options.database)
    from django.db import connection

    if connection.vendor != "postgresql":
        raise SystemExit("bench/growth.py measures PostgreSQL.")
    empty_table()
    small = measure(options.runs)
    filled = fill(options.finished, options.ready, options.refill)
    big = measure(options.runs)
    print(f"\nCost per job as the table grows, PostgreSQL ({filled})")
    print(f"{'µs per job':<28} {'empty table':>12} {'big table':>12} {'ratio':>6}")
    for name in small:
        ratio = big[name] / small[name]
        print(f"{name:<28} {small[name]:>12.1f} {big[name]:>12.1f} {ratio:>6.2f}")


def setup(url: str) -> None:
    import os

    import environ

    settings = environ.Env.db_url_config(url)
    admin = {**settings, "NAME": "postgres"}
    import psycopg

    with psycopg.connect(
        host=admin["HOST"] or None,
        port=admin["PORT"] or None,
        user=admin["USER"],
        dbname="postgres",
        password=admin["PASSWORD"] or None,
        autocommit=True,
    ) as raw:
        if not raw.execute("SELECT 1 FROM pg_database WHERE datname = %s", [settings["NAME"]]).fetchone():
            raw.execute(f'CREATE DATABASE "{settings["NAME"]}"')
    from bench import scratch

    os.environ["BENCH_SCRATCH_NAME"] = settings["NAME"]  # bench.settings: this database itself
    scratch.setup(url)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def empty_table() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE django_dbjobs_job")
        cursor.execute("ANALYZE django_dbjobs_job")
    from bench import jobs
    from django_dbjobs import enqueue_many

    enqueue_many(jobs.noop, [()] * 5000)


def fill(finished: int, ready: int, refill: bool) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE status = 'SUCCESSFUL'), count(*) FILTER (WHERE status = 'READY')"
            " FROM django_dbjobs_job"
        )
        have_finished, have_ready = cursor.fetchone()
    if not refill and have_finished >= finished and have_ready >= ready - 10_000:
        return f"{have_finished:,} finished and {have_ready:,} ready jobs, reused"
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE django_dbjobs_job")
        for values, count, span in ((FINISHED, finished, "7 days"), (READY, ready, "1 hour")):
            for first in range(0, count, CHUNK):
                last = min(first + CHUNK, count) - 1
                sql = ROWS_SQL.format(finished="at" if values is FINISHED else "NULL")
                cursor.execute(sql, {**values, "first": first, "last": last, "count": count, "span": span})
                print(f"  {values['status']}: {last + 1:,} of {count:,} rows", flush=True)
        cursor.execute("VACUUM (ANALYZE) django_dbjobs_job")
    seconds = time.perf_counter() - started
    return f"{finished:,} finished and {ready:,} ready jobs, made in {seconds:.0f} s"


def measure(runs: int) -> dict:
    from bench import jobs
    from django_dbjobs import enqueue
    from django_dbjobs.models import Job

    figures: dict[str, list[float]] = {
        "enqueue()": [],
        "claim (10 a claim)": [],
        "completion (10 at once)": [],
    }
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(2000):
            enqueue(jobs.noop)
        figures["enqueue()"].append((time.perf_counter() - started) / 2000 * 1e6)
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
        figures["claim (10 a claim)"].append(claiming / claimed * 1e6)
        figures["completion (10 at once)"].append(finishing / claimed * 1e6)
    return {name: statistics.median(values) for name, values in figures.items()}


if __name__ == "__main__":
    main()
