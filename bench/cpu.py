"""CPU per job on both sides (W9): what one job costs the database server and the Python
processes, in CPU time, so a deployment can be sized per core.

The server's CPU is read from /proc (the server runs on this machine): every process of
PostgreSQL (``postgres``; the postmaster's reaped children count too, so the backends of
connections closed during the run are not lost) or MariaDB (``mariadbd``/``mysqld``, one
process). SQLite has no server: its work is in the Python process. The client's is this
process's own CPU time (enqueue) or the worker processes' (``RUSAGE_CHILDREN``, less what
the same ``run_jobs --burst`` costs with nothing to do: starting Django).
"""

import os
import resource
import time
from pathlib import Path

from django.db import connection

from bench import jobs
from bench.run import DEFAULTS, FASTEST, Workers, summarise
from django_dbjobs import enqueue, enqueue_many
from django_dbjobs.models import Job, JobStatus

SERVERS = {"postgres", "mariadbd", "mysqld"}
TICK = os.sysconf("SC_CLK_TCK")


def _server_stats() -> dict[str, list[str]]:
    """The fields of /proc/<pid>/stat after the name, by pid, for each database server process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone since listed
            continue
        if stat[stat.index("(") + 1 : stat.rindex(")")] in SERVERS:
            found[entry.name] = stat[stat.rindex(")") + 2 :].split()
    return found


def settled(before: set[str], timeout: float = 5.0) -> None:
    """Wait until every server process started since `before` (pids) is gone: the backends
    of the connections a run closed have exited and been reaped, so their CPU is in the
    postmaster's (a backend reaped while server_cpu() reads /proc would count nowhere)."""
    deadline = time.monotonic() + timeout
    while set(_server_stats()) - before:
        if time.monotonic() > deadline:
            print(f"warning: server processes still running: {sorted(set(_server_stats()) - before)}")
            return
        time.sleep(0.05)


def server_cpu() -> float:
    """Seconds of CPU used so far by the database server's processes (0 for SQLite)."""
    # utime, stime, then cutime, cstime: the children it has waited for (backends).
    return sum(int(value) for fields in _server_stats().values() for value in fields[11:15]) / TICK


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu() -> float:
    return time.process_time()


def _measured(work, client) -> tuple[float, float]:
    """(client, server) CPU seconds of work()."""
    processes = set(_server_stats())
    client_before, server_before = client(), server_cpu()
    work()
    settled(processes)
    return client() - client_before, server_cpu() - server_before


def enqueues(count: int) -> tuple[float, float]:
    def work():
        for _ in range(count):
            enqueue(jobs.noop)

    return _measured(work, own_cpu)


def bulk(count: int) -> tuple[float, float]:
    return _measured(lambda: enqueue_many(jobs.noop, [()] * count), own_cpu)


def drain(count: int, setup: dict) -> tuple[float, float]:
    def burst():
        Workers(setup["processes"], setup["args"], setup["env"]).wait()

    idle_client, idle_server = _measured(burst, children_cpu)  # starting and stopping
    enqueue_many(jobs.noop, [()] * count)
    client, server = _measured(burst, children_cpu)
    if Job.objects.exclude(status=JobStatus.SUCCESSFUL).exists():
        raise SystemExit("the workers left jobs undone")
    return client - idle_client, server - idle_server


def w9_all(runs: int, count: int, taking_turns) -> dict:
    per_job: dict[str, list[tuple[float, float]]] = {}
    onces = {
        "enqueue()": lambda: enqueues(count // 5),
        "enqueue_many()": lambda: bulk(count),
        "drain, defaults": lambda: drain(count, DEFAULTS),
        "drain, fastest settings": lambda: drain(count, FASTEST[connection.vendor]),
    }
    jobs_done = {"enqueue()": count // 5}
    taking_turns(runs, *(_pair(once, per_job, name) for name, once in onces.items()))
    results = {}
    for name, pairs in per_job.items():
        done = jobs_done.get(name, count)
        client = [pair[0] / done * 1e6 for pair in pairs]
        server = [pair[1] / done * 1e6 for pair in pairs]
        results[f"W9 CPU per job, {name}: Python"] = {**summarise(client), "unit": "µs"}
        if any(server):
            results[f"W9 CPU per job, {name}: database server"] = {**summarise(server), "unit": "µs"}
    return results


def _pair(once, per_job: dict, name: str):
    def run() -> float:
        pair = once()
        per_job.setdefault(name, []).append(pair)
        return pair[0]

    return run
