"""Cancelling jobs (JobQuerySet.cancel(), worker/running/cancel_watch.py): ready ones deleted, running ones
interrupted by their worker and recorded cancelled, never retried."""

import signal
import time

import pytest

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.testing import run_jobs as run_jobs_here
from tests import jobs
from tests.conftest import wait_for

from .admin_helpers import action, staff

CANCELLED = "django_dbjobs.exceptions.JobCancelled"

pytestmark = pytest.mark.django_db(transaction=True)


def started(record_file, value) -> bool:
    return f"started:{value}" in record_file.read_text().split()


def cancel_when_started(job, record_file, value, via="api"):
    """Cancel `job` once it has started, through the API or the admin's stop action."""
    assert wait_for(lambda: started(record_file, value), timeout=20)
    asked_at = time.monotonic()
    if via == "api":
        assert Job.objects.filter(pk=job.pk).cancel() == 1
    else:
        client = staff("ops", "django_dbjobs.view_job", "django_dbjobs.change_job")
        response = action(client, "/admin/django_dbjobs/job/", "stop_running", [job], post="yes")
        assert client.messages(response) == ["1 running job asked to stop."]
    return asked_at


@pytest.mark.parametrize("via", ["api", "admin"])
@pytest.mark.parametrize(
    ("function", "name"), [(jobs.runs_in_python, "sync"), (jobs.async_announce_sleep, "async")]
)
def test_a_running_job_is_interrupted_within_two_seconds_and_never_retried(
    run_jobs, record_file, function, name, via
):
    job = enqueue(function, 60, name)
    worker = run_jobs("--concurrency", "2")
    asked_at = cancel_when_started(job, record_file, name, via)
    assert wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.FAILED, timeout=10)
    took = time.monotonic() - asked_at
    job.refresh_from_db()
    assert job.errors[-1]["exception_class_path"] == CANCELLED
    assert job.attempts == 1 and job.max_attempts == 3  # not retried
    assert name not in record_file.read_text().split()  # it never got to its end
    assert took < 2.5, took
    after = enqueue(jobs.add, 1, 2)  # the worker goes on
    assert wait_for(lambda: Job.objects.get(pk=after.pk).status == JobStatus.SUCCESSFUL, timeout=10)
    time.sleep(0.5)
    assert Job.objects.get(pk=job.pk).status == JobStatus.FAILED
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    assert "Job interrupted: cancelled" in worker.output()


def test_a_job_that_checks_the_flag_stops_by_itself(run_jobs, record_file):
    job = enqueue(jobs.stops_by_itself, 60, "polite")
    worker = run_jobs()
    cancel_when_started(job, record_file, "polite")
    assert wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.FAILED, timeout=10)
    job.refresh_from_db()
    assert "saw:polite" in record_file.read_text().split()
    assert job.errors[-1]["exception_class_path"] == CANCELLED and job.attempts == 1
    assert "stopped at the request" in job.last_error
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


@pytest.mark.parametrize("via", ["api", "admin"])
def test_a_job_blocked_in_c_is_recorded_cancelled_and_its_worker_exits_3(run_jobs, record_file, via):
    job = enqueue(jobs.sleeps_in_c_untimed, 60, "blocked")
    worker = run_jobs("--concurrency", "2", "--exit-when-stuck", env={"DBJOBS_TEST_STUCK_AFTER": "1"})
    cancel_when_started(job, record_file, "blocked", via)
    assert worker.wait(60) == 3, worker.output()  # as a stuck timeout: its supervisor replaces it
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.errors[-1]["exception_class_path"] == CANCELLED
    assert "could not be interrupted" in job.last_error and job.attempts == 1
    assert "was cancelled and cannot be interrupted" in worker.output()


def test_cancel_deletes_ready_jobs_and_leaves_finished_ones():
    ready = enqueue(jobs.add, 1, 2)
    done = enqueue(jobs.add, 2, 3)
    Job.objects.filter(pk=done.pk).update(status=JobStatus.SUCCESSFUL)
    assert Job.objects.all().cancel() == 1
    assert not Job.objects.filter(pk=ready.pk).exists()
    assert Job.objects.get(pk=done.pk).status == JobStatus.SUCCESSFUL


def test_a_job_that_finishes_before_its_worker_learns_of_the_request_keeps_its_outcome():
    enqueue(jobs.add, 1, 2)
    (job,) = Job.objects.claim("w1")
    assert Job.objects.filter(pk=job.pk).cancel() == 1
    assert Job.objects.filter(pk=job.pk).cancel() == 0  # asked once
    assert job.mark_succeeded("w1", 3)
    job.refresh_from_db()
    assert (job.status, job.return_value) == (JobStatus.SUCCESSFUL, 3)


def test_a_job_asked_to_stop_that_fails_by_itself_is_recorded_cancelled_and_never_runs_again(record_file):
    enqueue(jobs.record, "ran")
    (job,) = Job.objects.claim("w1")
    Job.objects.filter(pk=job.pk).request_cancel()
    assert job.mark_for_retry("w1", {"summary": "ValueError: x"}, delay=3600)  # its own failure, then
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.errors[-1]["exception_class_path"] == CANCELLED
    assert [error["summary"] for error in job.errors][0] == "ValueError: x"
    assert "not retried" in job.last_error
    assert run_jobs_here() == [] and record_file.read_text() == ""
    # Charged its own failed run only.
    assert (job.attempts, job.worker_ids) == (1, ["w1"])


def test_a_dead_letter_retried_after_a_cancel_runs_again():
    from django_dbjobs.models import FailedJob

    enqueue(jobs.add, 1, 2)
    (job,) = Job.objects.claim("w1")
    Job.objects.filter(pk=job.pk).request_cancel()
    Job.objects.filter(pk=job.pk).update(status=JobStatus.FAILED)
    FailedJob.objects.filter(pk=job.pk).retry_all()
    job.refresh_from_db()
    assert job.cancel_requested_at is None
    (after,) = run_jobs_here()
    assert after.status == JobStatus.SUCCESSFUL


def test_a_keyed_job_blocked_in_c_keeps_its_slot_until_its_worker_exits(run_jobs, record_file):
    """Recorded (and its slot freed) only as its process exits: the stuck call runs until then."""
    job = enqueue(jobs.keyed_sleeps_in_c, "a", 60)
    busy = enqueue(jobs.runs_in_python, 6, "busy")  # keeps the worker in its grace for a while
    worker = run_jobs(
        "--concurrency",
        "2",
        "--shutdown-grace",
        "10",
        "--exit-when-stuck",
        env={"DBJOBS_TEST_STUCK_AFTER": "1"},
    )
    assert wait_for(lambda: started(record_file, "a") and started(record_file, "busy"), timeout=20)
    Job.objects.filter(pk=job.pk).cancel()
    assert wait_for(lambda: "cannot be interrupted" in worker.output(), timeout=10), worker.output()
    assert worker.process.poll() is None and Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    assert worker.wait(30) == 3, worker.output()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.errors[-1]["exception_class_path"] == CANCELLED
    assert Job.objects.get(pk=busy.pk).status == JobStatus.SUCCESSFUL
