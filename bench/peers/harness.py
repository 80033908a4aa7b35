"""The measurements of the side-by-side benchmark, the same code for every queue.

Runs inside one queue's virtualenv (stdlib only here): ``python bench/peers/harness.py
--system pgqueuer --dsn ... --workload single --count 2000`` prints one JSON object.
Each system is an adapter module next to this file (``adapter_<system>.py``) with:

- ``install()``: create its tables in the (empty) scratch database;
- ``reset()``: empty them;
- ``single(count) -> seconds``: ``count`` jobs, one per transaction, as its docs show;
- ``bulk(count, chunk) -> seconds``: the same in calls of ``chunk`` jobs (or None: no API);
- ``enqueue_now(i)``: one job of the stamping function with argument ``i``, committed
  on return;
- ``pending() -> int``: jobs not finished yet;
- ``worker_commands() -> list[list[str]]``: the worker process(es) at its defaults,
  with two jobs at a time where it has such a setting.

The stamping job appends ``"<i> <time.time()>"`` to the file named by ``BENCH_STAMPS``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", required=True)
    parser.add_argument("--dsn", required=True, help="postgresql://user@host:port/scratch_database")
    parser.add_argument("--workload", required=True, choices=["install", "single", "bulk", "wakeup", "drain"])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=8.0, help="drain: stop measuring after this long")
    options = parser.parse_args()
    os.environ["BENCH_PEER_DSN"] = options.dsn
    sys.path.insert(0, str(HERE))
    adapter = importlib.import_module(f"adapter_{options.system.replace('-', '_')}")
    if options.workload == "install":
        adapter.install()
        result = {}
    elif options.workload == "single":
        adapter.reset()
        result = {"jobs_per_s": options.count / adapter.single(options.count)}
    elif options.workload == "bulk":
        adapter.reset()
        seconds = adapter.bulk(options.count, 1000)
        result = {"jobs_per_s": None if seconds is None else options.count / seconds}
    elif options.workload == "wakeup":
        adapter.reset()
        result = wakeup(adapter, options.count)
    else:
        adapter.reset()
        result = drain(adapter, options.count, options.seconds)
    print(json.dumps(result))


class Workers:
    def __init__(self, adapter, stamps: Path):
        env = {**os.environ, "BENCH_STAMPS": str(stamps)}
        self.log = Path(f"/tmp/bench-peers-worker-{os.getpid()}.log")
        with self.log.open("w") as log:
            self.procs = [
                subprocess.Popen(command, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)
                for command in adapter.worker_commands()
            ]

    def log_tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log.exists() else ""

    def pss_mib(self) -> float:
        """The proportional set size of the worker processes together, in MiB."""
        total = 0.0
        for proc in self.procs:
            try:
                for line in Path(f"/proc/{proc.pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) / 1024
            except OSError:
                pass
        return total

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def read_stamps(path: Path) -> dict[str, float]:
    stamps = {}
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, at = line.partition(" ")
            if at:
                stamps[key] = float(at)
    return stamps


def wait_for(path: Path, keys: set[str], timeout: float) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        stamps = read_stamps(path)
        if keys <= stamps.keys() or time.monotonic() > deadline:
            return stamps
        time.sleep(0.02)


def wakeup(adapter, count: int) -> dict:
    """An idle worker; `count` jobs enqueued 50 ms apart: commit -> job start, in ms."""
    stamps = Path(f"/tmp/bench-peers-stamps-{os.getpid()}")
    stamps.unlink(missing_ok=True)
    workers = Workers(adapter, stamps)
    try:
        # Started and idle: a first job has run, then a quiet second.
        deadline = time.monotonic() + 60
        while "warm" not in read_stamps(stamps) and time.monotonic() < deadline:
            adapter.enqueue_now("warm")
            wait_for(stamps, {"warm"}, 3.0)
        if "warm" not in read_stamps(stamps):
            raise SystemExit(f"the worker ran no job within 60 s; it said:\n{workers.log_tail()}")
        time.sleep(1.0)
        committed = {}
        for i in range(count):
            adapter.enqueue_now(str(i))
            committed[str(i)] = time.time()
            time.sleep(0.05)
        started = wait_for(stamps, set(committed), 30.0)
    finally:
        workers.stop()
        stamps.unlink(missing_ok=True)
    latencies = sorted((started[k] - at) * 1000 for k, at in committed.items() if k in started)
    if len(latencies) < count:
        raise SystemExit(f"only {len(latencies)} of {count} jobs ran; the worker said:\n{workers.log_tail()}")
    return {
        "p50_ms": latencies[len(latencies) // 2],
        "p95_ms": latencies[int(len(latencies) * 0.95)],
        "max_ms": latencies[-1],
    }


def drain(adapter, count: int, seconds: float) -> dict:
    """`count` no-op jobs waiting; workers started: jobs/s from the first finished to the last
    (or to `seconds` later), and the largest PSS of the workers together meanwhile."""
    seconds_bulk = adapter.bulk(count, 1000)
    if seconds_bulk is None:  # no bulk API: one by one
        adapter.single(count)
    workers = Workers(adapter, Path("/dev/null"))
    pss = 0.0
    try:
        first = None
        deadline = time.monotonic() + 120
        while True:
            left = adapter.pending()
            now = time.monotonic()
            pss = max(pss, workers.pss_mib())
            if first is None and left < count:
                first, first_left = now, left
            if first is not None and (left == 0 or now - first >= seconds):
                break
            if now > deadline:
                raise SystemExit(f"the workers did not start draining within 120 s:\n{workers.log_tail()}")
            time.sleep(0.05)  # a poll is a count(*) and a /proc read: not too often on 2 cores
    finally:
        workers.stop()
    if first_left - left <= 0:
        raise SystemExit(f"no progress to measure (drained between two polls?):\n{workers.log_tail()}")
    workers.log.unlink(missing_ok=True)
    return {"jobs_per_s": (first_left - left) / max(now - first, 1e-6), "pss_mib": pss}


if __name__ == "__main__":
    main()
