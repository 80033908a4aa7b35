"""What the job table's size costs (PostgreSQL): the same operations on an empty table, then
with 10 M finished and 1 M ready jobs.

    .venv/bin/python bench/growth.py                    # dbjobs_growth_bench, 10 M + 1 M rows
    .venv/bin/python bench/growth.py --finished 1000000 --ready 100000

Like bench/admin.py it keeps its database (created if missing, never a ``test_`` one): the
rows are made once by the server (bench/growth_fill.py: ``INSERT ... SELECT`` from
``generate_series`` in chunks of a million, the plain indexes made after the rows), then
``VACUUM ANALYZE``d, and reused by the next run while the table holds that many (ready
jobs claimed meanwhile are made again; ``--refill`` makes every row again). The finished
jobs have ids in enqueue order (UUIDv7) over the past seven days, as a busy queue leaves
them; the ready jobs are due, and claims take from them.

The empty table is a second database beside it (``<name>_empty``, emptied before each
round, then given 5,000 ready jobs for its claims, and 21,000 old successes for its
retention batches). Each round runs in a process of its own (bench/growth_rounds.py), the
empty table's and the big table's taking turns, and starts with a ``VACUUM (INDEX_CLEANUP
ON)`` of the table: the state a vacuum that cleans the indexes leaves (autovacuum may skip
index cleanup when few pages hold dead rows, and the claim then reads past more dead
entries: these are the figures after a cleaning vacuum). Each figure is the median of
``--runs`` rounds; in microseconds per job:

- enqueue(): 2,000 calls, each its own transaction;
- claim: 300 claims of 10 jobs (``Job.objects.claim()``, the worker's statement);
- completion: those jobs finished 10 at a time (``finish_successes()``, the worker's
  success batch), fenced on owner and pickup;
- retention: 3 batches of 1,000 successes past a day's keep time (``delete_batch()``,
  the oldest first, as a worker prunes): the big table loses 3,000 rows a round, and the
  run ends by saying how many remain;

in milliseconds per call (the median of 5 after a warm-up, in each round; the empty
table's after it has been given as many ready jobs as the big one holds, and vacuumed:
these reads count the ready jobs, and the ratio is what the finished rows cost them):

- dbjobs_status: ``read_status()`` as ``dbjobs_status --json`` reads it;
- admin job list: the job list's first page, and its ready jobs (``?status__exact=READY``),
  loaded by a superuser through django.test.Client (bench/growth_settings.py);
- gauges scrape: one request to the database gauges' view.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import growth_fill, growth_rounds  # noqa: E402


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
    parser.add_argument("--backlog", type=int, default=0, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.round:  # one round, in a process of its own: print its figures
        setup(options.database)
        print(json.dumps(growth_rounds.run_round(options.round, options.backlog)))
        return
    setup(options.database)
    from django.db import connection

    if connection.vendor != "postgresql":
        raise SystemExit("bench/growth.py measures PostgreSQL.")
    filled = growth_fill.fill(options.finished, options.ready, options.refill)
    _finished, backlog = growth_fill.counts()
    connection.close()
    # The empty table is a database of its own, so the big one is kept; their rounds take
    # turns (empty, big, empty, ...), so a noisy moment on the machine is shared.
    empty_url = options.database.rstrip("/") + "_empty"
    small: dict[str, list[float]] = {}
    big: dict[str, list[float]] = {}
    deleted = 0
    for _ in range(options.runs):
        for url, kind, figures in ((empty_url, "empty", small), (options.database, "big", big)):
            child = [sys.executable, __file__, "--database", url, "--round", kind, "--backlog", str(backlog)]
            out = subprocess.run(child, check=True, capture_output=True, text=True).stdout
            measured = json.loads(out.strip().splitlines()[-1])
            for name, value in measured["figures"].items():
                figures.setdefault(name, []).append(value)
            deleted += measured["deleted"] if kind == "big" else 0
    print(f"\nCost per job as the table grows, PostgreSQL ({filled}), medians of {options.runs}")
    for unit, names in (
        ("µs per job", [name for name in small if name not in growth_rounds.MS_FIGURES]),
        ("ms per call", growth_rounds.MS_FIGURES),
    ):
        print(f"{unit:<28} {'empty table':>12} {'big table':>12} {'ratio':>6}")
        for name in names if small else ():
            before, after = statistics.median(small[name]), statistics.median(big[name])
            print(f"{name:<28} {before:>12.1f} {after:>12.1f} {after / before:>6.2f}")
    print(f"Retention deleted {deleted:,} of the big table's oldest successes; {remaining()}.")


def remaining() -> str:
    """What the big table holds after the rounds: its successes, and those past their keep time."""
    from django.db import connection

    finished, _ready = growth_fill.counts()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM django_dbjobs_job WHERE status = 'SUCCESSFUL'"
            " AND finished_at < now() - make_interval(secs => %s)",
            [growth_rounds.KEEP],
        )
        old = cursor.fetchone()[0]
    return f"{finished:,} successes remain, {old:,} of them past the keep time"


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
    # With the admin and the gauges' view, which the rounds load.
    scratch.setup(url, settings="bench.growth_settings")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


if __name__ == "__main__":
    main()
