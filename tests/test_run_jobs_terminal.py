"""run_jobs on a terminal (a live progress line with --burst) and its --queues validation."""

import os
import pty
import select
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_on_a_terminal(*args: str) -> tuple[int, str]:
    """Run `manage.py run_jobs` with its stdout on a pseudo-terminal; return its status and output."""
    leader, follower = pty.openpty()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DBJOBS_TEST_DATABASE_NAME": str(connection.settings_dict["NAME"]),
        "PYTHONPATH": ROOT,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "django", "run_jobs", *args],
        cwd=ROOT,
        env=env,
        stdout=follower,
        stderr=follower,  # log lines and the live line share the terminal, as they would
    )
    os.close(follower)
    output = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            process.kill()
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process exited
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    return process.wait(timeout=60), output.decode()


def test_burst_on_a_terminal_draws_a_live_line_and_a_summary():
    for _ in range(30):
        enqueue(jobs.slow, 0.1)
    enqueue(jobs.always_fails, max_attempts=1)
    status, output = run_on_a_terminal("--burst", "--concurrency", "2")
    assert status == 0, output
    assert "\r\x1b[Kprocessed" in output and "left" in output  # redrawn in place while running
    summary = output.rsplit("\r\x1b[K", 1)[-1]
    assert summary.startswith("processed 31  failed 1  "), repr(summary)
    # Every log line starts at the left margin: the live line was cleared before it.
    logged = [
        line for line in output.replace("\r\n", "\n").split("\n") if " ERROR " in line or " INFO " in line
    ]
    assert any("Job failed" in line for line in logged), output
    for line in logged:
        assert "processed " not in line.split("\r\x1b[K")[-1], repr(line)
    assert Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 30


def test_not_a_terminal_gets_no_progress_line(run_jobs):
    enqueue(jobs.add, 1, 2)
    worker = run_jobs("--burst")
    assert worker.wait() == 0
    assert "processed" not in worker.output() and "\r" not in worker.output()


def test_queues_outside_dbjobs_queues_are_refused(settings):
    settings.DBJOBS_QUEUES = ["default", "emails"]
    with pytest.raises(CommandError, match="'typo' is not one of DBJOBS_QUEUES"):
        call_command("run_jobs", "--burst", "--queues", "emails,typo")
