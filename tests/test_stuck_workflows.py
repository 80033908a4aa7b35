"""dbjobs_status reports the workflows that can no longer finish (operations/stuck_workflows.py)."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_dbjobs import batch, enqueue
from django_dbjobs.models import Blocked, Job, JobDependency
from django_dbjobs.operations.stuck_workflows import cannot_finish, cycles, read_stuck
from tests import jobs


@pytest.mark.parametrize(
    ("waits", "gone", "stuck"),
    [
        ({"b": {"a"}}, set(), set()),  # a is not waiting: it finishes
        ({"b": {"a"}, "c": {"b"}}, {"a"}, {"b", "c"}),
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}, "d": {"x"}}, set(), {"a", "b", "c"}),
        ({"job": {"batch"}, "batch": {"member"}, "member": {"job"}}, set(), {"job", "batch", "member"}),
    ],
)
def test_cannot_finish(waits, gone, stuck):
    assert cannot_finish(waits, gone) == stuck


def test_cycles_reports_each_knot_once_not_what_waits_behind_it():
    waits = {"a": {"b"}, "b": {"a"}, "c": {"a"}, "d": {"e"}, "e": {"d", "gone"}, "f": {"gone"}}
    assert cycles(waits, cannot_finish(waits, {"gone"})) == [["a", "b"], ["d", "e"]]


def status_json():
    out = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("dbjobs_status", "--json", stdout=out)
    return json.loads(out.getvalue()), str(failed.value)


def wait_for(job, upstream):
    """Make `job` wait for `upstream` as enqueue(after=...) would, without its checks."""
    JobDependency.objects.create(job=job, upstream=upstream)
    Job.objects.filter(pk=job.pk).update(blocked=Blocked.AFTER, waiting_for=1)
    Job.objects.filter(pk=upstream).update(has_dependents=True)


@pytest.mark.django_db(transaction=True)
def test_status_reports_a_job_of_a_batch_waiting_for_its_callback():
    with batch(on_complete=jobs.batch_completed) as album:
        member = enqueue(jobs.noop, 1)
    wait_for(member, album.on_complete)  # what enqueue() now refuses, made by hand
    report, problems = status_json()
    (stuck,) = report["workflows"]["stuck"]
    assert stuck["kind"] == "cycle" and stuck["batches"] == [album.pk]
    assert sorted(stuck["jobs"]) == sorted([member.pk, album.on_complete])
    assert report["workflows"]["jobs_never_run"] == 2 and not report["healthy"]
    assert f"batch {album.pk} waits for job {member.pk}" in problems


@pytest.mark.django_db(transaction=True)
def test_status_reports_jobs_waiting_for_a_deleted_job_and_a_batch_whose_job_was_deleted():
    first = enqueue(jobs.noop, 1)
    waiting = enqueue(jobs.noop, 2, after=[first])
    behind = enqueue(jobs.noop, 3, after=[waiting])
    with batch() as album:
        gone = enqueue(jobs.noop, 4)
    Job.objects.filter(pk__in=[first.pk, gone.pk]).delete()  # not cancel(): nothing is told
    report, problems = status_json()
    kinds = {item["kind"]: item for item in report["workflows"]["stuck"]}
    assert kinds["job_gone"]["jobs"] == [first.pk, waiting.pk]
    assert kinds["batch_jobs_gone"]["batches"] == [album.pk]
    assert report["workflows"]["jobs_never_run"] == 2, f"{waiting.pk} and {behind.pk}"
    assert f"job {first.pk} no longer exists" in problems


@pytest.mark.django_db(transaction=True)
def test_status_finds_nothing_stuck_in_workflows_that_will_finish():
    with batch(on_complete=jobs.batch_completed) as album:
        first = enqueue(jobs.noop, 1)
        enqueue(jobs.noop, 2, after=[first])
    enqueue(jobs.noop, 3, after=[album.on_complete])
    out = io.StringIO()
    with pytest.raises(CommandError, match="no live worker serves it") as failed:
        call_command("dbjobs_status", "--json", stdout=out)
    assert "never run" not in str(failed.value)
    assert json.loads(out.getvalue())["workflows"]["stuck"] == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "mysql", reason="MySQL/MariaDB alone pick another index")
def test_the_open_batches_active_jobs_are_read_on_the_batch_index():
    with batch():
        enqueue(jobs.add, 1, 1)
    with CaptureQueriesContext(connection) as queries:
        assert read_stuck() == ([], 0, False)
    [read] = [query["sql"] for query in queries.captured_queries if "has_active" in query["sql"]]
    assert "FORCE INDEX (`dbjobs_job_batch_idx`)" in read
