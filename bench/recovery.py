"""Measure how long a job of a kill -9'd worker takes to start again on another worker.

Uses the example project and whatever DBJOBS_* settings it has (the library defaults
unless you set them), against DATABASE_URL (default: the example's SQLite file):

    DATABASE_URL=postgres://root@127.0.0.1:5432/dbjobs_bench .venv/bin/python bench/recovery.py

The documented bound is DBJOBS_HEARTBEAT_TIMEOUT + DBJOBS_SWEEP_INTERVAL (+ one poll).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "example_project"
sys.path[:0] = [str(EXAMPLE), str(EXAMPLE.parent)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from django_dbjobs import enqueue  # noqa: E402
from django_dbjobs.conf import settings  # noqa: E402
from django_dbjobs.models import Job, JobStatus, WorkerProcess  # noqa: E402


def worker() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_jobs", "-v", "0"], cwd=EXAMPLE, stdout=subprocess.DEVNULL
    )


def wait(predicate, timeout=300.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(0.05)


def main() -> None:
    call_command("migrate", verbosity=0)
    Job.objects.all().delete()
    WorkerProcess.objects.all().delete()
    job = enqueue("demo.jobs.nap", 600)
    first = worker()
    wait(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exists())
    time.sleep(float(os.environ.get("BENCH_KILL_AFTER", "2")))
    lost = Job.objects.get(pk=job.pk).worker
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = time.monotonic()
    second = worker()
    wait(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exclude(worker=lost).exists())
    took = time.monotonic() - killed
    second.send_signal(signal.SIGKILL)
    second.wait()
    Job.objects.filter(pk=job.pk).delete()
    WorkerProcess.objects.all().delete()
    bound = settings.HEARTBEAT_TIMEOUT + settings.SWEEP_INTERVAL
    print(
        f"database={django.db.connection.vendor} heartbeat_interval={settings.HEARTBEAT_INTERVAL}s "
        f"timeout={settings.HEARTBEAT_TIMEOUT}s sweep_interval={settings.SWEEP_INTERVAL}s "
        f"bound={bound:.0f}s recovered_after={took:.1f}s"
    )


if __name__ == "__main__":
    main()
