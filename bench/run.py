"""django-dbjobs benchmark: enqueue, drain and wake-up, next to the raw SQL limit.

    .venv/bin/python bench/run.py --database postgres://root@127.0.0.1:5432/dbjobs_bench
    .venv/bin/python bench/run.py --database sqlite:////tmp/bench.sqlite3 --runs 5 --json out.json
    .venv/bin/python bench/run.py --database mysql://root@127.0.0.1:3306/dbjobs_bench --smoke

A scratch database (test_<name>) is created on that server and dropped afterwards;
your own tables are never touched. See bench/README.md.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import scratch  # noqa: E402

# The drain settings that were fastest on a 2-core machine (see bench/README.md).
# No-op jobs: one single-threaded process per core, claiming up to 1,000 at a time;
# on SQLite a single process, as every claim and acknowledgement takes the one write lock.
FASTEST = {
    "sqlite": {"processes": 1, "args": ["--concurrency", "1", "--prefetch", "1000"], "env": {}},
    "postgresql": {"processes": 2, "args": ["--concurrency", "1", "--prefetch", "1000"], "env": {}},
    "mysql": {"processes": 2, "args": ["--concurrency", "1", "--prefetch", "1000"], "env": {}},
}
# 10 ms (I/O-like) jobs: many threads per process. A job thread only opens a database
# connection if its job uses one: outcomes are written by the worker's main thread.
FASTEST_SLEEPY = {"processes": 2, "args": ["--concurrency", "64"], "env": {}}
DEFAULTS = {"processes": 1, "args": ["--concurrency", "2"], "env": {}}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", required=True, help="Database URL (django-environ syntax).")
    parser.add_argument("--runs", type=int, default=3, help="Runs per figure (median, min-max).")
    parser.add_argument("--smoke", action="store_true", help="Tiny sizes, one run: checks it works.")
    parser.add_argument("--json", help="Also write the results to this file.")
    parser.add_argument(
        "--only",
        default="W1,W2,W2s,W3,W4",
        help="Comma list of workloads to run (default: W1,W2,W2s,W3,W4; W5 to W7, W10, W11, W13 on request).",
    )
    options = parser.parse_args()
    scratch.setup(options.database)
    runs = 1 if options.smoke else options.runs
    scale = 0.02 if options.smoke else 1.0
    with scratch.scratch_database() as connection:
        from bench import workloads

        results = workloads.run_all(runs, scale, set(options.only.split(",")))
    print_table(connection.vendor, results)
    if options.json:
        Path(options.json).write_text(
            json.dumps({"database": connection.vendor, "results": results}, indent=2)
        )


def summarise(samples: list[float]) -> dict:
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "samples": samples,
    }


def print_table(vendor: str, results: dict) -> None:
    print(f"\ndjango-dbjobs benchmark on {vendor} ({os.cpu_count()} cores)")
    print(f"{'workload':<44} {'median':>10} {'min-max':>19} {'limit':>9} {'ratio':>6}")
    for name, row in results.items():
        unit = row.get("unit", "jobs/s")
        limit = row.get("limit")
        ratio = f"{row['median'] / limit:.2f}" if limit else ""
        digits = 2 if row["max"] < 100 else 0  # milliseconds and MiB with their decimals
        spread = f"{row['min']:.{digits}f}-{row['max']:.{digits}f}"
        limit_text = f"{limit:.{digits}f}" if limit else ""
        print(f"{name:<44} {row['median']:>10.1f} {spread:>19} {limit_text:>9} {ratio:>6}  {unit}")


class Workers:
    """run_jobs subprocesses against the scratch database."""

    def __init__(self, processes: int, args: list[str], env: dict, burst: bool = True):
        from django.db import connection

        environment = {
            **os.environ,
            **env,
            "BENCH_SCRATCH_NAME": str(connection.settings_dict["NAME"]),
            "PYTHONPATH": str(ROOT),
        }
        command = [sys.executable, "-m", "django", "run_jobs", "-v", "0", *args]
        if burst:
            command.append("--burst")
        self.procs = [
            subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL)
            for _ in range(processes)
        ]

    def rss_mib(self) -> list[float]:
        sizes = []
        for proc in self.procs:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    sizes.append(int(line.split()[1]) / 1024)
        return sizes

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)

    def wait(self) -> list[float]:
        """Wait for every process; return each one's peak RSS in MiB."""
        peaks = []
        for proc in self.procs:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                raise SystemExit(f"run_jobs exited with {proc.returncode}")
            peaks.append(usage.ru_maxrss / 1024)
        return peaks


if __name__ == "__main__":
    main()
