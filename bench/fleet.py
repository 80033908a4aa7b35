"""A fleet behind PgBouncer (PostgreSQL): N worker processes through a private pooler, idle and draining.

    .venv/bin/python bench/fleet.py --database postgres://root@127.0.0.1:5432/dbjobs_bench --processes 64
    .venv/bin/python bench/fleet.py --database postgres://root@127.0.0.1:5432/dbjobs_bench \\
        --processes 2 --jobs 5000 --idle-seconds 5 --settle 3          # a smoke run: 40 s

Starts a PgBouncer of its own (tests/pgbouncer_server.py: transaction mode, ``--pool-size``
server connections, max_client_conn 500) in front of a scratch database, then N lone
``run_jobs --concurrency 1`` processes whose 'default' goes through it (bench/settings.py,
BENCH_POOLER_PORT), in two ways: "probe" (no DBJOBS_LISTEN_DATABASE: each idle worker probes
every 10-50 ms through the pooler) and "listen" (DBJOBS_LISTEN_DATABASE names a direct alias:
one direct connection per worker); "direct" (on request) bypasses the pooler. For each,
once every process is up and ``--settle`` seconds have passed: ``--idle-seconds`` idle
(server CPU, PgBouncer's CPU, the workers' CPU, transactions at the server and queries
through PgBouncer, per second); then ``--trickle-seconds`` of single enqueues, 10 a second
(what each costs beyond the idle fleet's cost: on PostgreSQL every NOTIFY wakes every
idle LISTENing process); then ``--jobs`` no-op jobs enqueued in one
``enqueue_many()`` and drained (jobs/s from the first claim to the last finish, database
clock; CPU per job on each side, counted from just after the enqueue's commit);
connections at the end of the idle window and at their peak during the drain. What is
read and how: bench/fleet_gauges.py. Runs take turns (probe, listen, probe...).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import scratch  # noqa: E402

#: The workers' environment for each way through the pooler (bench/settings.py); "direct"
#: bypasses it (three connections per process: at most 30 processes on 100 connections).
WAYS = {"probe": {}, "listen": {"BENCH_LISTEN_DIRECT": "1"}}
DIRECT = "direct"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", required=True, help="PostgreSQL URL (django-environ syntax).")
    parser.add_argument("--processes", default="64", help="Comma list of fleet sizes (default 64).")
    parser.add_argument(
        "--ways", default="probe,listen", help="probe, listen, direct (default probe,listen)."
    )
    parser.add_argument("--jobs", type=int, default=100_000, help="No-op jobs drained (default 100,000).")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="The idle window (default 20).")
    parser.add_argument("--trickle-seconds", type=float, default=10.0, help="Single enqueues, 10/s (10).")
    parser.add_argument("--settle", type=float, default=10.0, help="Seconds idle before it (default 10).")
    parser.add_argument("--pool-size", type=int, default=30, help="PgBouncer's default_pool_size (30).")
    parser.add_argument(
        "--runs", type=int, default=1, help="Runs of each fleet (median printed, all in --json)."
    )
    parser.add_argument("--json", help="Also write the results to this file.")
    options = parser.parse_args()
    scratch.setup(options.database)
    results: dict[str, dict[str, list[float]]] = {}
    with scratch.scratch_database() as connection:
        if connection.vendor != "postgresql":
            raise SystemExit("bench/fleet.py measures PgBouncer: PostgreSQL only")
        for _ in range(options.runs):
            for size in (int(n) for n in options.processes.split(",")):
                for way in options.ways.split(","):
                    print(f"{size} processes, {way}...", flush=True)
                    figures = measure(size, way, options)
                    for name, value in figures.items():
                        results.setdefault(f"{size} {way}", {}).setdefault(name, []).append(value)
    report(results, options)


def measure(size: int, way: str, options) -> dict[str, float]:
    """One fleet of `size` processes waking up by `way`: its figures, by name."""
    from django.db import connection

    from bench import jobs, memory
    from bench.fleet_gauges import Gauges
    from bench.run import Workers
    from bench.workloads import fresh_tables
    from tests.pgbouncer_server import PgBouncer

    fresh_tables()
    settings = connection.settings_dict
    with tempfile.TemporaryDirectory() as directory:
        bouncer = PgBouncer(settings, Path(directory), {settings["NAME"]: "transaction"}, options.pool_size)
        workers = None
        try:
            env = {} if way == DIRECT else {**WAYS[way], "BENCH_POOLER_PORT": str(bouncer.port)}
            workers = Workers(size, ["--concurrency", "1"], env, burst=False)
            up_in = all_up(workers, size)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                (own_pid,) = cursor.fetchone()
            gauges = Gauges(settings, own_pid, bouncer, [proc.pid for proc in workers.procs])
            try:
                time.sleep(options.settle)
                idle_figures, idle_per_second = idle(gauges, options.idle_seconds)
                figures = {"start-up s": up_in, **idle_figures}
                figures["workers PSS total MiB"] = sum(memory.pss_mib(proc.pid) for proc in workers.procs)
                figures.update(trickle(gauges, jobs.noop, options.trickle_seconds, idle_per_second))
                figures.update(drain(gauges, jobs.noop, options.jobs))
            finally:
                gauges.close()
        finally:
            if workers is not None:
                workers.stop()
                workers.wait()
            bouncer.stop()
    return figures


def all_up(workers, size: int) -> float:
    """Wait until each of the `size` processes has registered; return the seconds it took."""
    from django_dbjobs.models import WorkerProcess

    started = time.monotonic()
    while WorkerProcess.objects.count() < size:
        if any(proc.poll() is not None for proc in workers.procs):
            raise SystemExit("a worker process exited while starting (too many connections?)")
        if time.monotonic() - started > 600:
            raise SystemExit("the worker processes did not all start within 10 minutes")
        time.sleep(0.2)
    return time.monotonic() - started


COSTS = ("server CPU", "pooler CPU", "workers CPU", "transactions", "pooler queries")


def idle(gauges, seconds: float) -> tuple[dict[str, float], dict[str, float]]:
    """The fleet's cost over `seconds` with nothing to do, and its connections: its figures,
    and each of COSTS per second (trickle() leaves that out)."""
    started = gauges.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(min(0.5, max(deadline - time.monotonic(), 0)))
        gauges.sample()
    taken = gauges.end(started)
    per_second = {name: taken[name] / taken["seconds"] for name in COSTS}
    figures = {}
    for name in COSTS[:3]:
        figures[f"idle: {name}, % of a core"] = per_second[name] * 100
    for name in COSTS[3:]:
        figures[f"idle: {name} per s"] = per_second[name]
    # Per process, to set beside a fleet of another size (on one machine, a large fleet's
    # rates are bounded too by the cores it shares with the server).
    processes = len(gauges.workers)
    figures["idle per process: server CPU, % of a core"] = per_second["server CPU"] * 100 / processes
    figures["idle per process: workers CPU, % of a core"] = per_second["workers CPU"] * 100 / processes
    figures["idle per process: transactions per s"] = per_second["transactions"] / processes
    figures.update({f"idle: {name}": value for name, value in gauges.connections().items()})
    return figures, per_second


def trickle(gauges, job, seconds: float, idle_per_second: dict[str, float]) -> dict[str, float]:
    """Jobs enqueued one at a time, 10 a second, for `seconds`, to the idle fleet: what each
    costs, the idle cost left out (as docs/performance.rst's figure: every NOTIFY wakes every
    idle process). The enqueues' own server CPU is not counted (the bench's backend)."""
    from django_dbjobs import enqueue
    from django_dbjobs.models import Job

    started = gauges.start()
    count = 0
    while count < seconds * 10:
        enqueue(job)
        count += 1
        gauges.sample()
        time.sleep(max(started["seconds"] + count / 10 - time.monotonic(), 0))
    finished(gauges, {})
    taken = gauges.end(started)
    cost = {name: taken[name] - idle_per_second[name] * taken["seconds"] for name in COSTS}
    figures = {f"trickle: {name} ms per job": cost[name] / count * 1000 for name in COSTS[:3]}
    figures.update({f"trickle: {name} per job": cost[name] / count for name in COSTS[3:]})
    Job.objects.all().delete()  # out of the drain's span
    return figures


def finished(gauges, peaks: dict[str, float]) -> None:
    """Wait until every job has succeeded (10 minutes at most), sampling `gauges`; the highest
    connection counts seen go to `peaks`."""
    from django_dbjobs.models import Job, JobStatus

    deadline = time.monotonic() + 600
    while Job.objects.exclude(status=JobStatus.SUCCESSFUL).exists():
        if time.monotonic() > deadline or Job.objects.filter(status=JobStatus.FAILED).exists():
            raise SystemExit("the jobs did not all succeed within 10 minutes")
        gauges.sample()
        for name, value in gauges.connections().items():
            if name != "max_connections":
                peaks[name] = max(peaks.get(name, 0), value)
        time.sleep(0.05)


def drain(gauges, job, count: int) -> dict[str, float]:
    """Enqueue `count` jobs in one transaction and wait until they are done (see the module)."""
    from django.db.models import Max, Min

    from django_dbjobs import enqueue_many
    from django_dbjobs.models import Job

    enqueue_many(job, [()] * count)
    started = gauges.start()
    peaks: dict[str, float] = {}
    finished(gauges, peaks)
    taken = gauges.end(started)
    span = Job.objects.aggregate(first=Min("started_at"), last=Max("finished_at"))
    figures = {"drain jobs/s": count / max((span["last"] - span["first"]).total_seconds(), 1e-6)}
    figures.update({f"drain: {name} µs per job": taken[name] / count * 1e6 for name in COSTS[:3]})
    figures.update({f"drain: {name} per job": taken[name] / count for name in COSTS[3:]})
    figures.update({f"drain peak: {name}": value for name, value in peaks.items()})
    return figures


def report(results: dict[str, dict[str, list[float]]], options) -> None:
    columns = list(results)
    names = list(dict.fromkeys(name for figures in results.values() for name in figures))
    print(f"\nA fleet behind PgBouncer (pool {options.pool_size}): median of {options.runs} run(s)")
    print(f"{'':<48}" + "".join(f"{column:>14}" for column in columns))
    for name in names:
        cells = [statistics.median(results[column].get(name) or [float("nan")]) for column in columns]
        print(f"{name:<48}" + "".join(f"{cell:>14.{2 if abs(cell) < 100 else 0}f}" for cell in cells))
    if options.json:
        Path(options.json).write_text(json.dumps({"options": vars(options), "results": results}, indent=2))


if __name__ == "__main__":
    main()
