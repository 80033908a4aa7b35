"""Worker memory next to Django's own floor (W8): proportional set size (PSS), each process alone.

The floor is a process that does what every Django process does and no more: ``django.setup()``
with the benchmark's settings and one open connection to the database. The worker is one
``run_jobs --concurrency 2`` draining 10,000 no-op jobs; its PSS is sampled every 20 ms.
Each runs alone (PSS splits the pages processes share: two Python processes side by side
would each count half of the interpreter).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

from bench import jobs
from bench.run import ROOT, summarise
from django_dbjobs import enqueue_many
from django_dbjobs.models import Job, JobStatus

FLOOR = (
    "import django, sys, time; django.setup(); from django.db import connection;"
    " connection.ensure_connection(); print('ready', flush=True); sys.stdin.read()"
)


def pss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no Pss line")


def _environment() -> dict:
    from django.db import connection

    name = str(connection.settings_dict["NAME"])
    return {**os.environ, "BENCH_SCRATCH_NAME": name, "PYTHONPATH": str(ROOT)}


def floor() -> float:
    """PSS of a bare django.setup() process with one open connection, alone."""
    process = subprocess.Popen(
        [sys.executable, "-c", FLOOR],
        cwd=ROOT,
        env={**_environment(), "DJANGO_SETTINGS_MODULE": "bench.settings"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        process.stdout.readline()
        time.sleep(0.5)
        return pss_mib(process.pid)
    finally:
        process.stdin.close()
        process.wait()


def draining(count: int) -> float:
    """Largest PSS of one run_jobs --concurrency 2 while it drains `count` no-op jobs, alone."""
    enqueue_many(jobs.noop, [()] * count)
    command = [sys.executable, "-m", "django", "run_jobs", "-v", "0", "--concurrency", "2"]
    process = subprocess.Popen(command, cwd=ROOT, env=_environment(), stdout=subprocess.DEVNULL)
    peak = 0.0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            peak = max(peak, pss_mib(process.pid))
            if not Job.objects.filter(status=JobStatus.READY).exists():
                break
            time.sleep(0.02)
        peak = max(peak, pss_mib(process.pid))
    finally:
        process.terminate()
        process.wait()
    if Job.objects.filter(status=JobStatus.READY).exists():
        raise SystemExit("the worker did not drain its jobs within 120 s")
    return peak


def w8_all(runs: int, count: int, taking_turns) -> dict:
    bare, worker = taking_turns(runs, floor, lambda: draining(count))
    base = summarise(bare)["median"]
    return {
        "W8 PSS, bare django.setup() + 1 connection (floor)": {**summarise(bare), "unit": "MiB"},
        "W8 PSS, run_jobs --concurrency 2 draining": {**summarise(worker), "unit": "MiB", "limit": base},
    }
