"""Hours of steady load: does the job table stay flat and the claim fast? (issue 40)

    .venv/bin/python bench/sustained.py --database postgres://root@127.0.0.1:5432/dbjobs_bench \\
        --minutes 60 --rate 2000 --json sustained-pg.json --svg docs/_static/sustained-pg.svg
    .venv/bin/python bench/sustained.py --database postgres://... --minutes 30 \\
        --long-transaction 10:10          # a snapshot held open from minute 10 for 10 minutes

A scratch database (never your own tables); one ``run_jobs`` process with the default
settings drains; a producer process enqueues ``--rate`` no-op jobs a second with
``enqueue_many()`` (a call every 50 ms) and retention deletes finished jobs older than
``--keep`` seconds (the workers' own pruning, ``DBJOBS_KEEP_SUCCEEDED``). Ten times a
second a prober, beside them, times one ``enqueue()`` and one claim of up to 10 jobs
(``Job.objects.claim()``, the worker's statement, on the same queue) and finishes what
it took. Every minute: claim and enqueue latency p50/p99, the producer's
``enqueue_many()`` p99 and how far it fell behind, the job table's and its indexes'
sizes, dead rows and vacuums (bench/sustained_stats.py), jobs by status and the age of
the oldest finished job kept.

``--long-transaction START:MINUTES`` opens another session at minute START that takes a
REPEATABLE READ snapshot (``application_name`` bench-long-transaction) and holds it for
MINUTES: no row deleted or updated after it began can be vacuumed meanwhile.

The verdict is printed at the end: after the warm-up (``--warm-up`` minutes: the table
fills until jobs older than ``--keep`` are pruned), the table's and indexes' sizes
within 15 % of their median, and the claim p99 of the last ten minutes within 1.3 times
the first ten's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROBE_WORKER = "bench-sustained-probe"
TICK = 0.05  # the producer's call interval (seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="postgres://root@127.0.0.1:5432/dbjobs_bench")
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--rate", type=int, default=2000, help="jobs enqueued per second")
    parser.add_argument("--keep", type=float, default=300, help="seconds finished jobs are kept")
    parser.add_argument("--warm-up", type=int, default=10, help="minutes left out of the verdict")
    parser.add_argument("--sample", type=float, default=60, help="seconds between samples")
    parser.add_argument("--processes", type=int, default=1, help="run_jobs processes draining")
    parser.add_argument("--long-transaction", metavar="START:MINUTES")
    parser.add_argument(
        "--autovacuum",
        action="store_true",
        help="PostgreSQL: turn the server's autovacuum on for the run (ALTER SYSTEM), as it is by "
        "default, and back to the configuration file's value after (a CI server may have it off)",
    )
    parser.add_argument("--json", help="write the samples here")
    parser.add_argument("--svg", help="plot them here")
    parser.add_argument("--produce", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from bench import scratch

    scratch.setup(args.database)
    if args.produce:
        return produce(args.rate, args.minutes)
    with scratch.scratch_database() as connection, autovacuum_on(connection, args.autovacuum):
        samples = run(args, connection.settings_dict["NAME"])
    report(samples, args)


def run(args, name: str) -> list[dict]:
    from bench import sustained_stats
    from bench.sustained_load import LongTransaction, Prober

    environment = {
        **os.environ,
        "BENCH_SCRATCH_NAME": str(name),
        "BENCH_KEEP_SUCCEEDED": str(args.keep),
        "PYTHONPATH": str(ROOT),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "django", "run_jobs", "-v", "0"],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.DEVNULL,
        )
        for _ in range(args.processes)
    ]
    producer = subprocess.Popen(
        [sys.executable, __file__, "--produce", "--database", args.database, "--rate", str(args.rate)]
        + ["--minutes", str(args.minutes + 1)],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
    )
    produced: list[dict] = []
    reader = threading.Thread(
        target=lambda: produced.extend(json.loads(line) for line in producer.stdout), daemon=True
    )
    reader.start()
    prober = Prober(PROBE_WORKER)
    prober.start()
    long = LongTransaction(args.long_transaction)
    samples = []
    status_text = None
    started = time.monotonic()
    try:
        for minute in range(1, int(args.minutes * 60 / args.sample) + 1):
            time.sleep(max(0.0, started + minute * args.sample - time.monotonic()))
            long.at(minute * args.sample / 60)
            row = {"minute": round(minute * args.sample / 60, 2), **prober.take(), **sustained_stats.sample()}
            row["long_transaction"] = long.open
            row["load1"] = round(os.getloadavg()[0], 2)  # the machine's load: others' work shows here
            if long.open and status_text is None and long.minutes_open(row["minute"]) >= 2:
                status_text = dbjobs_status()  # what an operator sees meanwhile
                print(status_text, flush=True)
            samples.append(row)
            print(line(row), flush=True)
    finally:
        long.close()
        prober.stop()
        producer.terminate()
        producer.wait()
        reader.join(timeout=5)
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait()
    if status_text is not None:
        samples[0]["status_during_long_transaction"] = status_text
    by_minute = {round(each["minute"]): each for each in produced}
    for row in samples:
        row.update(
            {f"producer_{key}": value for key, value in by_minute.get(round(row["minute"]), {}).items()}
        )
    return samples


@contextlib.contextmanager
def autovacuum_on(connection, wanted: bool):
    """PostgreSQL, if `wanted`: autovacuum on for the block, then as it was (an earlier ALTER
    SYSTEM value put back; otherwise the configuration file's again)."""
    if not wanted or connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setting FROM pg_file_settings WHERE name = 'autovacuum' AND sourcefile LIKE %s",
            ["%.auto.conf"],
        )
        earlier = cursor.fetchall()  # a value ALTER SYSTEM wrote before the run
        cursor.execute("ALTER SYSTEM SET autovacuum = on")
        cursor.execute("SELECT pg_reload_conf()")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if earlier:
                cursor.execute(f"ALTER SYSTEM SET autovacuum = '{earlier[-1][0]}'")
            else:
                cursor.execute("ALTER SYSTEM RESET autovacuum")
            cursor.execute("SELECT pg_reload_conf()")


def produce(rate: int, minutes: float) -> None:
    """The producer process: `rate` jobs a second, a call every TICK, one JSON line a minute."""
    from bench import jobs
    from django_dbjobs import enqueue_many

    per_call = max(1, round(rate * TICK))
    started = time.monotonic()
    latencies: list[float] = []
    sent = behind = 0
    minute = 1
    for call in range(int(minutes * 60 / TICK)):
        due = started + call * TICK
        if (wait := due - time.monotonic()) > 0:
            time.sleep(wait)
        else:
            behind = max(behind, -wait)
        before = time.perf_counter()
        enqueue_many(jobs.noop, [()] * per_call)
        latencies.append(time.perf_counter() - before)
        sent += per_call
        if time.monotonic() - started >= minute * 60:
            figures = {"minute": minute, "sent": sent, "behind_s": round(behind, 3)}
            print(json.dumps({**figures, **quantiles("enqueue_many", latencies)}), flush=True)
            latencies, sent, behind, minute = [], 0, 0, minute + 1


def dbjobs_status() -> str:
    """``manage.py dbjobs_status`` as a probe runs it (its exit status given after its output)."""
    import io

    from django.core.management import call_command
    from django.core.management.base import CommandError

    out = io.StringIO()
    try:
        call_command("dbjobs_status", "--fail-if-long-transaction", "60", stdout=out)
        return out.getvalue() + "exit 0"
    except CommandError as exc:
        return f"{out.getvalue()}{exc}\nexit {exc.returncode}"


def quantiles(name: str, seconds: list[float]) -> dict:
    """p50 and p99 of `seconds`, in milliseconds, keyed `name`_p50_ms and `name`_p99_ms."""
    if len(seconds) < 2:
        return {}
    cuts = statistics.quantiles(seconds, n=100)
    return {f"{name}_p50_ms": round(cuts[49] * 1000, 3), f"{name}_p99_ms": round(cuts[98] * 1000, 3)}


def line(row: dict) -> str:
    shown = ("minute", "claim_p50_ms", "claim_p99_ms", "enqueue_p99_ms", "table_mib", "indexes_mib")
    shown += (
        "dead_rows",
        "history_length",
        "wal_mib",
        "ready",
        "finished",
        "oldest_finished_s",
        "long_transaction",
    )
    return "  ".join(f"{key}={row[key]}" for key in shown if key in row)


def report(samples: list[dict], args) -> None:
    from bench.sustained_plot import plot, verdict

    for text in verdict(samples, args.warm_up):
        print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"arguments": vars(args), "samples": samples}, indent=1))
    if args.svg:
        Path(args.svg).write_text(plot(samples, title=f"{args.rate} jobs/s, {args.minutes:g} min"))


if __name__ == "__main__":
    main()
