"""W10, worker metrics: the same drain with ``run_jobs --metrics-port`` off and on, runs taking turns."""

import socket
import statistics

from bench import jobs
from bench.run import DEFAULTS, summarise

#: One supervisor of two single-threaded processes claiming 1,000 at a time: the fastest
#: no-op drain on PostgreSQL and MariaDB, and the children's values shared through files.
SUPERVISED = {
    "processes": 1,
    "args": ["--processes", "2", "--concurrency", "1", "--prefetch", "1000"],
    "env": {},
}


def with_metrics(setup: dict) -> dict:
    """`setup` serving its metrics on a free local port (a fresh one for each run)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [*setup["args"], "--metrics-address", "127.0.0.1", "--metrics-port", str(port)]
    return {**setup, "args": args}


def w10_all(runs: int, count: int, taking_turns) -> dict:
    from bench.workloads import drain

    results = {}
    for label, setup in (
        ("defaults, --concurrency 2", DEFAULTS),
        ("--processes 2, prefetch 1000", SUPERVISED),
    ):
        off = lambda setup=setup: drain(jobs.noop, count, setup, [])  # noqa: E731
        on = lambda setup=setup: drain(jobs.noop, count, with_metrics(setup), [])  # noqa: E731
        without, served = taking_turns(runs, off, on)
        results[f"W10 drain, {label}, metrics off"] = summarise(without)
        results[f"W10 drain, {label}, metrics on"] = {
            **summarise(served),
            "limit": statistics.median(without),
        }
    return results
