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

The empty table is a second database beside it (``<name>_empty``, emptied before each
round, then given 5,000 ready jobs for its claims). Each round runs in a process of its
own, the empty table's and the big table's taking turns, and starts with a ``VACUUM
(INDEX_CLEANUP ON)`` of the table: the state a vacuum that cleans the indexes leaves
(autovacuum may skip index cleanup when few pages hold dead rows, and the claim then
reads past more dead entries: these are the figures after a cleaning vacuum). Each figure is microseconds per
job, the median of ``--runs`` rounds:

- enqueue(): 2,000 calls, each its own transaction;
- claim: 300 claims of 10 jobs (``Job.objects.claim()``, the worker's statement);
- completion: those jobs finished 10 at a time (``finish_successes()``, the worker's
  success batch), fenced on owner and pickup.
"""

import argparse
import json
import statistics
import subprocess
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
    parser.add_argument("--round", choices=["empty", "big"], help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.round:  # one round, in a process of its own: print its figures
        setup(options.database)
        if options.round == "empty":
            empty_table()
        vacuum()
        print(json.dumps(measure()))
        return
    setup(options.database)
    from django.db import connection

    if connection.vendor != "postgresql":
        raise SystemExit("bench/growth.py measures PostgreSQL.")
    filled = fill(options.finished, options.ready, options.refill)
    connection.close()
    # The empty table is a database of its own, so the big one is kept; their rounds take
    # turns (empty, big, empty, ...), so a noisy moment on the machine is shared.
    empty_url = options.database.rstrip("/") + "_empty"
    small: dict[str, list[float]] = {}
    big: dict[str, list[float]] = {}
    for _ in range(options.runs):
        for url, kind, figures in ((empty_url, "empty", small), (options.database, "big", big)):
            child = [sys.executable, __file__, "--database", url, "--round", kind]
            out = subprocess.run(child, check=True, capture_output=True, text=True).stdout
            for name, value in json.loads(out.strip().splitlines()[-1]).items():
                figures.setdefault(name, []).append(value)
    print(f"\nCost per job as the table grows, PostgreSQL ({filled}), medians of {options.runs}")
    print(f"{'µs per job':<28} {'empty table':>12} {'big table':>12} {'ratio':>6}")
    for name in small:
        before, after = statistics.median(small[name]), statistics.median(big[name])
        print(f"{name:<28} {before:>12.1f} {after:>12.1f} {after / before:>6.2f}")


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


def vacuum() -> None:
    """Both tables start a round as autovacuum leaves them: the claim index without the
    entries of jobs claimed since (INDEX_CLEANUP ON: PostgreSQL 14+ skips the indexes when
    few pages have dead rows, and those entries would pile up at the head of the claim
    index from one round to the next)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM (INDEX_CLEANUP ON, ANALYZE) django_dbjobs_job")


def measure() -> dict:
    """One round: µs per job of each operation."""
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


if __name__ == "__main__":
    main()
