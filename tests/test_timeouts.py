"""Job timeouts: interrupted in their thread, cancelled when async, their process ended when stuck in C."""

import datetime
import signal
import time

import pytest
from django.utils import timezone

from django_dbjobs import enqueue
from django_dbjobs.enqueuing import job_function as registry
from django_dbjobs.exceptions import InvalidJob
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from django_dbjobs.worker import Worker
from tests import jobs
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
TIMEOUT = "django_dbjobs.exceptions.JobTimeout"


def drain():
    for _ in range(10):
        Job.objects.filter(status=JobStatus.READY).update(
            run_at=timezone.now() - datetime.timedelta(seconds=1)
        )
        Worker(burst=True, concurrency=2).run()
        if not Job.objects.filter(status__in=[JobStatus.READY, JobStatus.RUNNING]).exists():
            return
    raise AssertionError("jobs did not settle")


def test_a_job_past_its_timeout_is_interrupted_retried_then_dead_lettered():
    job = enqueue(jobs.spins_forever)
    started = time.monotonic()
    drain()
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.FAILED, 2)
    assert [e["exception_class_path"] for e in job.errors] == [TIMEOUT, TIMEOUT]
    assert "ran longer than its timeout of 0.5s and was interrupted" in job.last_error
    assert "in spins_forever" in job.errors[0]["traceback"]  # where it was when interrupted
    assert time.monotonic() - started < 10


def test_except_exception_does_not_swallow_the_timeout():
    job = enqueue(jobs.swallows_exceptions)
    drain()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.errors[-1]["exception_class_path"] == TIMEOUT


def test_the_default_timeout_applies_to_jobs_without_their_own(settings):
    settings.DBJOBS_DEFAULT_TIMEOUT = 0.3
    slow = enqueue(jobs.spin_for, 30, max_attempts=1)
    own = enqueue(jobs.quick_with_timeout, 1)  # its own 5 s applies, and it is quick
    drain()
    slow.refresh_from_db()
    own.refresh_from_db()
    assert slow.status == JobStatus.FAILED and "timeout of 0.3s" in slow.last_error
    assert (own.status, own.return_value) == (JobStatus.SUCCESSFUL, 1)


def test_runs_ending_at_their_deadline_get_one_clear_outcome_and_leave_nothing_behind(settings):
    """Jobs that spin for exactly their timeout: some finish first, some are interrupted, none
    gets a bare or late interruption, and the next jobs on the same threads run untouched."""
    from django_dbjobs.worker.running import deadlines

    settings.DBJOBS_DEFAULT_TIMEOUT = 0.02
    created = [enqueue(jobs.spin_for, 0.02, max_attempts=1) for _ in range(60)]
    Worker(burst=True, concurrency=2).run()
    rows = list(Job.objects.filter(pk__in=[j.pk for j in created]))
    assert {r.status for r in rows} <= {JobStatus.SUCCESSFUL, JobStatus.FAILED} and len(rows) == 60
    for row in rows:
        if row.status == JobStatus.FAILED:
            assert row.errors[-1]["exception_class_path"] == TIMEOUT
            assert "timeout of 0.02s" in row.last_error, row.last_error
    assert deadlines.due_in() is None, "a deadline was left armed"
    settings.DBJOBS_DEFAULT_TIMEOUT = None
    after = [enqueue(jobs.spin_for, 0.05) for _ in range(10)]
    Worker(burst=True, concurrency=2).run()
    assert set(Job.objects.filter(pk__in=[j.pk for j in after]).values_list("status", flat=True)) == {
        JobStatus.SUCCESSFUL
    }


def test_an_async_job_past_its_timeout_is_cancelled():
    job = enqueue(jobs.async_sleeps_too_long)
    started = time.monotonic()
    drain()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.errors[-1]["exception_class_path"] == TIMEOUT
    assert time.monotonic() - started < 10


def test_timeout_option_is_validated():
    for bad in (0, -1, "10", True):
        with pytest.raises(InvalidJob, match="timeout must be"):
            registry.job(timeout=bad)(lambda: None)


def test_a_job_stuck_in_c_code_ends_its_process_under_the_supervisor(run_jobs, record_file):
    stuck = enqueue(jobs.sleeps_in_c, 60, "stuck")
    neighbour = enqueue(jobs.announce_sleep_record, 2.0, "neighbour")
    supervisor = run_jobs(
        "--processes",
        "2",
        "--concurrency",
        "2",
        "--prefetch",
        "0",
        "--exit-when-stuck",
        env={"DBJOBS_TEST_STUCK_AFTER": "1", "DBJOBS_TEST_RESTART_PAUSE": "0.2"},
    )
    assert wait_for(lambda: "started:stuck" in record_file.read_text().split()), supervisor.output()
    assert wait_for(lambda: Job.objects.get(pk=stuck.pk).status == JobStatus.FAILED, timeout=30)
    stuck.refresh_from_db()
    assert stuck.errors[-1]["exception_class_path"] == TIMEOUT
    assert (
        "could not be interrupted" in stuck.last_error and "its worker process was ended" in stuck.last_error
    )
    assert wait_for(lambda: "exit_status=3" in supervisor.output(), timeout=40), supervisor.output()
    assert wait_for(lambda: Job.objects.get(pk=neighbour.pk).status == JobStatus.SUCCESSFUL, timeout=40)
    assert "stuck" not in record_file.read_text().split()  # the sleeping call never came back
    supervisor.process.send_signal(signal.SIGTERM)
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0, supervisor.output()  # a requested stop; the death was logged


@pytest.mark.parametrize("why", ["timeout", "cancel"])
def test_a_stuck_job_never_takes_the_worker_down_its_process_starts_afresh(run_jobs, record_file, why):
    """A plain run_jobs, nothing to restart it: the stuck job is recorded, and the same
    process goes on as a fresh worker (a new identity), the stuck call gone with the old one."""
    if why == "timeout":
        stuck = enqueue(jobs.sleeps_in_c, 60, "stuck")
    else:
        stuck = enqueue(jobs.sleeps_in_c_untimed, 60, "stuck")
    worker = run_jobs("--concurrency", "2", env={"DBJOBS_TEST_STUCK_AFTER": "1"})
    pid = worker.process.pid
    assert wait_for(lambda: "started:stuck" in record_file.read_text().split()), worker.output()
    (first,) = WorkerProcess.objects.filter(pid=pid).values_list("pk", flat=True)
    if why == "cancel":
        assert Job.objects.filter(pk=stuck.pk).cancel() == 1
    assert wait_for(lambda: Job.objects.get(pk=stuck.pk).status == JobStatus.FAILED, timeout=30), (
        worker.output()
    )
    fresh = WorkerProcess.objects.filter(pid=pid).exclude(pk=first)
    assert wait_for(fresh.exists, timeout=30), worker.output()
    assert worker.process.poll() is None and not WorkerProcess.objects.filter(pk=first).exists()
    later = enqueue(jobs.add, 2, 3)
    assert wait_for(lambda: Job.objects.get(pk=later.pk).status == JobStatus.SUCCESSFUL, 20), worker.output()
    assert "stuck" not in record_file.read_text().split()  # the sleeping call never came back
    assert "Replacing this worker process with a fresh run_jobs" in worker.output()
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def test_without_a_supervisor_a_stuck_job_is_recorded_and_the_worker_exits_3(run_jobs, record_file):
    stuck = enqueue(jobs.sleeps_in_c, 60, "stuck")
    other = enqueue(jobs.announce_sleep_record, 1.0, "other")
    worker = run_jobs("--concurrency", "2", "--exit-when-stuck", env={"DBJOBS_TEST_STUCK_AFTER": "1"})
    assert worker.wait(60) == 3, worker.output()  # for systemd's Restart= (or Kubernetes) to replace it
    assert "cannot be interrupted" in worker.output()
    stuck.refresh_from_db()
    other.refresh_from_db()
    assert stuck.status == JobStatus.FAILED and "could not be interrupted" in stuck.last_error
    assert other.status == JobStatus.SUCCESSFUL  # the other thread's job finished within the grace


def test_a_deadline_cuts_a_long_poll_interval_short():
    """The loop waits up to its poll interval; a job's deadline starting meanwhile ends that
    wait (deadlines.looks_at()), so a 30 s poll does not make a 0.5 s timeout 30 s late."""
    job = enqueue(jobs.spins_forever, max_attempts=1)
    started = time.monotonic()
    Worker(burst=True, concurrency=1, poll_interval=30).run()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.errors[-1]["exception_class_path"] == TIMEOUT
    assert time.monotonic() - started < 10
