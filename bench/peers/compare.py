"""django-dbjobs next to other PostgreSQL job queues, on the same workloads in one run.

    make bench-peers            # installs each peer in .bench-venvs/<name>, then runs this
    .venv/bin/python bench/peers/compare.py --runs 5 --json peers.json

Each queue runs from its own virtualenv (none is a dependency of django-dbjobs), against
its own scratch database on the server (dbjobs_peers_<name>, dropped at the end). Runs
take turns (run 1 of every queue, then run 2, ...) so a noisy moment is shared. The
measuring code is the same for every queue: bench/peers/harness.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SYSTEMS = ["dbjobs", "dbjobs-unprepared", "dbjobs-tasks", "pgqueuer", "procrastinate", "tasks-db"]
TITLES = {
    "dbjobs": "django-dbjobs",
    "dbjobs-unprepared": "django-dbjobs (no prepared statements)",
    "dbjobs-tasks": "django-dbjobs (django.tasks)",
    "pgqueuer": "pgqueuer",
    "procrastinate": "procrastinate",
    "tasks-db": "django-tasks-db",
}
#: workload: (jobs or samples per run, what the table shows)
WORKLOADS = {
    "single": (2000, "single enqueue, one per transaction (jobs/s)"),
    "bulk": (5000, "bulk enqueue, chunks of 1,000 (jobs/s)"),
    "wakeup": (100, "wake-up latency of an idle worker, p50 / p95 (ms)"),
    "drain": (10000, "drain of no-op jobs, 2 at a time (pgqueuer: its default) (jobs/s)"),
    "pss": (0, "worker memory while draining, PSS of all its processes (MiB)"),
}


def python_of(system: str) -> Path:
    if system.startswith("dbjobs"):
        return Path(sys.executable)
    return ROOT / ".bench-venvs" / system / "bin" / "python"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", default="postgresql://root@127.0.0.1:5432", help="PostgreSQL server URL")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workloads", default="single,bulk,wakeup,drain")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run")
    parser.add_argument("--json", help="also write the results to this file")
    options = parser.parse_args()
    systems = [s for s in options.systems.split(",") if python_of(s).exists()]
    missing = set(options.systems.split(",")) - set(systems)
    if missing:
        print(f"skipped (no .bench-venvs/<name>; run make bench-peers-venvs): {', '.join(sorted(missing))}")
    runs = 1 if options.smoke else options.runs
    scale = 0.02 if options.smoke else 1.0
    samples: dict[str, dict[str, list]] = {s: {} for s in systems}
    for system in systems:
        database(options.server, system, create=True)
        harness(options, system, "install", 0)
    try:
        for workload in options.workloads.split(","):
            count = max(int(WORKLOADS[workload][0] * scale), 20)
            for _ in range(runs):
                for system in systems:
                    result = harness(options, system, workload, count)
                    samples[system].setdefault(workload, []).append(result)
                    print(f"{system:<14} {workload:<7} {json.dumps(result)}", flush=True)
    finally:
        for system in systems:
            database(options.server, system, create=False)
    table = summarise(samples)
    print_table(table, systems, runs, options.server)
    if options.json:
        Path(options.json).write_text(
            json.dumps({"machine": machine(options.server), "samples": samples, "table": table}, indent=2)
        )


def database(server: str, system: str, create: bool) -> None:
    name = f"dbjobs_peers_{system.replace('-', '_')}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if create:
            connection.execute(f"CREATE DATABASE {name}")


def harness(options, system: str, workload: str, count: int) -> dict:
    dsn = f"{options.server}/dbjobs_peers_{system.replace('-', '_')}"
    command = [str(python_of(system)), str(HERE / "harness.py"), "--system", system, "--dsn", dsn]
    command += ["--workload", workload, "--count", str(count)]
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:  # reported, and left out of the medians
        print(f"{system} {workload} failed:\n{done.stderr[-3000:]}", flush=True)
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(samples: dict) -> dict:
    table: dict[str, dict] = {}
    for system, by_workload in samples.items():
        row = table[system] = {}
        for workload, results in by_workload.items():
            for key in {key for result in results for key in result}:
                values = [r[key] for r in results if r.get(key) is not None]
                row[f"{workload}.{key}"] = statistics.median(values) if values else None
    return table


def cell(row: dict, *keys: str) -> str:
    values = [row.get(key) for key in keys]
    if all(v is None for v in values):
        return "no API"
    return " / ".join(f"{v:,.1f}" if v < 100 else f"{v:,.0f}" for v in values if v is not None)


def print_table(table: dict, systems: list[str], runs: int, server: str) -> None:
    print(f"\nOne run, medians of {runs}. {machine(server)}")
    rows = [
        ("single", ["single.jobs_per_s"]),
        ("bulk", ["bulk.jobs_per_s"]),
        ("wakeup", ["wakeup.p50_ms", "wakeup.p95_ms"]),
        ("drain", ["drain.jobs_per_s"]),
        ("pss", ["drain.pss_mib"]),
    ]
    header = ["workload", *(TITLES[s] for s in systems)]
    lines = [header]
    for workload, keys in rows:
        if not any(key in table[s] for s in systems for key in keys):
            continue
        lines.append([WORKLOADS[workload][1], *(cell(table[s], *keys) for s in systems)])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for n, line in enumerate(lines):
        print("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * width for width in widths))


def machine(server: str) -> str:
    with psycopg.connect(f"{server}/postgres") as connection:
        version = connection.execute("SHOW server_version").fetchone()[0]
    return f"{os.cpu_count()} cores, Python {platform.python_version()}, PostgreSQL {version}"


if __name__ == "__main__":
    main()
