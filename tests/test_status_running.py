"""dbjobs_status's running jobs and their progress (operations/running_jobs.py): JSON, the table, the cap."""

import datetime
import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbjobs.models import Job, JobStatus
from django_dbjobs.models.progress import Progress
from django_dbjobs.operations import running_jobs
from django_dbjobs.operations.status import read_status

pytestmark = pytest.mark.django_db(transaction=True)


def status(*args):
    out = io.StringIO()
    call_command("dbjobs_status", *args, stdout=out)
    return out.getvalue()


def running(minutes_ago: float, queue: str = "default", progress: Progress | None = None) -> Job:
    started = timezone.now() - datetime.timedelta(minutes=minutes_ago)
    return Job.objects.create(
        name="tests.long_jobs.count_with_progress",
        queue=queue,
        status=JobStatus.RUNNING,
        worker="h:1:a",
        last_attempted_at=started,
        started_at=started,
        progress_state=None if progress is None else progress.as_record(),
    )


def test_json_lists_running_jobs_longest_first_with_their_progress():
    now = timezone.now()
    since = now - datetime.timedelta(seconds=100)
    reporting = running(30, progress=Progress(40, 100, "users", 2.0, now, since, 0))
    silent = running(5, queue="emails")
    Job.objects.create(
        name="tests.jobs.add", status=JobStatus.SUCCESSFUL, progress_state=reporting.progress_state
    )
    report = json.loads(status("--json"))["running_jobs"]
    assert report["more"] == 0
    first, second = report["jobs"]
    assert (first["id"], second["id"]) == (reporting.pk, silent.pk)
    assert first["name"] == "tests.long_jobs.count_with_progress" and first["queue"] == "default"
    assert first["worker"] == "h:1:a" and 1790 < first["running_seconds"] < 1900
    assert datetime.datetime.fromisoformat(first["started_at"]) == reporting.last_attempted_at
    assert first["progress"] == {
        "done": 40,
        "total": 100,
        "percent": 40,
        "note": "users",
        "rate": 2.0,
        "eta_seconds": 30.0,
        "at": now.isoformat(),
    }
    assert second["progress"] is None and second["queue"] == "emails"
    assert [
        job["id"] for job in json.loads(status("--json", "--queues", "emails"))["running_jobs"]["jobs"]
    ] == [silent.pk]


def test_the_list_is_capped_and_counts_the_rest(monkeypatch):
    monkeypatch.setattr(running_jobs, "MAX_SHOWN", 3)
    jobs = [running(minutes) for minutes in (1, 9, 5, 7, 3)]
    with CaptureQueriesContext(connection) as queries:
        status_read = read_status(with_running=True)
    report = status_read.running.as_json(status_read.checked_at)
    assert [job["id"] for job in report["jobs"]] == [jobs[1].pk, jobs[3].pk, jobs[2].pk]
    assert report["more"] == 2
    reads = [q["sql"] for q in queries if "last_attempted_at" in q["sql"]]
    assert len(reads) == 1 and "args" not in reads[0] and "LIMIT 3" in reads[0].upper()
    assert read_status().running is None  # only when asked (dbjobs_status)


def test_the_table_has_a_section_only_when_running_jobs_report_progress():
    running(2)
    assert "reporting progress" not in status()
    now = timezone.now()
    job = running(4, progress=Progress(40, 100, "users", 2.0, now, now, 0))
    lines = status().splitlines()
    start = lines.index("Running jobs reporting progress (1 of 2 running):")
    assert lines[start + 1].startswith(
        f"  {job.pk}  tests.long_jobs.count_with_progress (default, running 4.0m)"
    )
    assert lines[start + 1].endswith(": 40/100 (40%), 2/s, 30.0s left  users")
