"""manage.py dbjobs_status: counts, lag, workers, JSON and the --fail-if-* exit codes."""

import datetime
import io
import json
import os
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from django_dbjobs.models import Job, JobStatus, Queue, WorkerProcess
from tests.conftest import live_worker

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status(*args):
    out = io.StringIO()
    call_command("dbjobs_status", *args, stdout=out)
    return out.getvalue()


def fill():
    past = timezone.now() - datetime.timedelta(minutes=10)
    Job.objects.create(name="tests.jobs.add", queue="default", run_at=past)
    Job.objects.create(name="tests.jobs.add", queue="default")
    Job.objects.create(
        name="tests.jobs.add", queue="default", run_at=timezone.now() + datetime.timedelta(hours=1)
    )
    Job.objects.create(name="tests.jobs.add", queue="emails", status=JobStatus.RUNNING, worker="w")
    Job.objects.create(name="tests.jobs.add", queue="emails", status=JobStatus.FAILED, finished_at=past)
    Job.objects.create(name="tests.jobs.add", queue="emails", status=JobStatus.SUCCESSFUL, finished_at=past)
    Job.objects.create(name="tests.jobs.add", queue="reports", run_at=past)
    Queue.objects.pause(["reports"], by="ops")


def test_json_reports_each_queue_and_the_live_workers():
    fill()
    live_worker("h:1:a", concurrency=4, queues=["default"])
    stale = WorkerProcess.objects.create(id="h:2:b", hostname="h", pid=2, concurrency=2)
    WorkerProcess.objects.filter(pk=stale.pk).update(
        heartbeat_at=timezone.now() - datetime.timedelta(hours=1)
    )
    report = json.loads(status("--json"))
    queues = {row["name"]: row for row in report["queues"]}
    assert set(queues) == {"default", "emails", "reports"}
    default, emails, reports = queues["default"], queues["emails"], queues["reports"]
    assert (default["ready_due"], default["ready_later"], default["running"], default["failed"]) == (
        2,
        1,
        0,
        0,
    )
    assert 590 < default["oldest_due_age_seconds"] < 700 and not default["paused"]
    assert (emails["ready_due"], emails["running"], emails["failed"]) == (0, 1, 1)
    assert emails["oldest_due_age_seconds"] is None
    assert reports["paused"] and reports["paused_by"] == "ops" and reports["ready_due"] == 1
    assert report["workers"]["live"] == 1 and report["workers"]["threads"] == 4
    assert report["workers"]["processes"][0]["queues"] == ["default"]
    assert report["healthy"] is True and report["problems"] == []


def test_table_output_is_readable():
    fill()
    out = io.StringIO()
    with pytest.raises(CommandError) as raised:  # due jobs and no worker: a problem, said on stderr
        call_command("dbjobs_status", stdout=out)
    text = out.getvalue()
    assert (
        str(raised.value)
        == "queue 'default': 2 due jobs and no live worker serves it (no live worker at all)"
    )
    assert "PROBLEM" not in text and "no live worker serves" not in text, "the table does not repeat it"
    assert text.splitlines()[0].split() == [
        "QUEUE",
        "DUE",
        "LATER",
        "RUNNING",
        "FAILED",
        "OLDEST",
        "DUE",
        "PAUSED",
    ]
    assert any(line.startswith("reports") and "by ops" in line for line in text.splitlines())
    assert "Live workers: 0 (0 job threads)" in text


def test_thresholds_exit_1_and_say_why():
    fill()
    live_worker("h:10:a")  # serves every queue
    with pytest.raises(CommandError, match="queue 'default': the oldest due job has waited") as raised:
        status("--fail-if-lag", "60")
    assert raised.value.returncode == 1
    assert "reports" not in str(raised.value)  # paused: its lag is not judged
    status("--fail-if-lag", "3600")  # under the limit: no error
    with pytest.raises(CommandError, match="1 failed jobs"):
        status("--fail-if-failed", "1")
    status("--fail-if-failed", "2")
    WorkerProcess.objects.all().delete()
    with pytest.raises(CommandError, match=r"no live worker \(no heartbeat within"):
        status("--fail-if-no-workers")
    live_worker("h:1:a")
    status("--fail-if-no-workers")
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("dbjobs_status", "--json", "--fail-if-failed", "1", stdout=out)
    report = json.loads(out.getvalue())  # JSON is printed first, with the verdict in it
    assert report["healthy"] is False and report["problems"] == [
        "1 failed jobs (dead letters; limit: fewer than 1)"
    ]


def test_queues_limit_what_is_reported_and_judged():
    fill()
    report = json.loads(status("--json", "--queues", "emails,nothing-here"))
    assert [row["name"] for row in report["queues"]] == ["emails", "nothing-here"]
    status("--queues", "reports,emails", "--fail-if-lag", "60")  # default's lag is not judged
    with pytest.raises(CommandError, match="queue must be"):
        status("--queues", "bad name!")


def test_no_workers_counts_only_workers_serving_the_queues_asked_about():
    fill()
    live_worker("h:1:a", queues=["default"])
    status("--queues", "default", "--fail-if-no-workers")
    with pytest.raises(CommandError, match="no live worker serving emails"):
        status("--queues", "emails", "--fail-if-no-workers")
    live_worker("h:2:b", queues=[])  # every queue
    status("--queues", "emails", "--fail-if-no-workers")


def test_an_empty_table_is_healthy():
    text = status("--fail-if-lag", "1", "--fail-if-failed", "1")
    assert "no jobs waiting, running or failed" in text


def test_the_exit_status_of_the_real_command(tmp_path):
    """What a Kubernetes probe or systemd ExecCondition sees: the process's exit status."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DBJOBS_TEST_DATABASE_NAME": str(connection.settings_dict["NAME"]),
        "PYTHONPATH": ROOT,
    }
    command = [sys.executable, "-m", "django", "dbjobs_status", "--fail-if-no-workers"]
    failing = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert failing.returncode == 1 and "no live worker" in failing.stderr
    # SQLite makes an empty file (no tables); a server refuses the connection.
    missing = (
        str(tmp_path / "missing.sqlite3") if connection.vendor == "sqlite" else "dbjobs_no_such_database"
    )
    unreadable = subprocess.run(
        command,
        cwd=ROOT,
        env={**env, "DBJOBS_TEST_DATABASE_NAME": missing},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if connection.vendor == "sqlite":  # an empty file: a database without our tables
        assert unreadable.returncode == 1 and "Run `python manage.py migrate`" in unreadable.stderr
    else:
        assert unreadable.returncode == 2 and "Cannot read the job tables" in unreadable.stderr
    live_worker("h:1:a")  # still live once the subprocess has started, however long that takes
    passing = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert passing.returncode == 0, passing.stderr
