"""django_dbjobs.testing inside users' TestCase and TransactionTestCase, and the pytest fixture."""

import datetime

import pytest
from django.db import connection, transaction
from django.test import TestCase, TransactionTestCase

from django_dbjobs import enqueue, enqueue_many
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.testing import TEST_WORKER, capture_jobs, run_jobs
from tests import jobs


class RunJobsChecks:
    """The same checks, run in a TestCase (never commits) and a TransactionTestCase."""

    def test_runs_due_jobs_in_this_thread_and_keeps_the_connection(self):
        first = enqueue(jobs.add, 1, 2)
        second = enqueue(jobs.echo, "x", kwargs={"y": 1})
        ran = run_jobs()
        assert [job.pk for job in ran] == [first.pk, second.pk]
        assert [job.status for job in ran] == [JobStatus.SUCCESSFUL] * 2
        assert Job.objects.get(pk=first.pk).return_value == 3
        assert Job.objects.get(pk=first.pk).worker_ids == [TEST_WORKER]
        assert connection.connection is not None and connection.is_usable()
        assert run_jobs() == []

    def test_jobs_enqueued_by_jobs_run_too(self):
        enqueue(jobs.chain, 3)
        assert [job.return_value for job in run_jobs()] == [3, 2, 1, 0]

    def test_future_jobs_and_retries_wait_unless_included(self):
        later = enqueue(jobs.add, 1, 1, delay=datetime.timedelta(hours=1))
        failing = enqueue(jobs.always_fails, max_attempts=3)
        with self.settings(DBJOBS_RETRY_BACKOFF=3600, DBJOBS_RETRY_BACKOFF_MAX=3600):
            ran = run_jobs()  # the retry is not due before the loop looks again, however slow the machine
        assert [job.pk for job in ran] == [failing.pk]  # one attempt; its retry waits
        assert Job.objects.get(pk=failing.pk).status == JobStatus.READY
        ran = run_jobs(include_scheduled=True)
        assert Job.objects.get(pk=later.pk).status == JobStatus.SUCCESSFUL
        failed = Job.objects.get(pk=failing.pk)
        assert (failed.status, failed.attempts, len(failed.errors)) == (JobStatus.FAILED, 3, 3)

    def test_queues_limit_what_runs(self):
        email = enqueue(jobs.send_email, "a@example.com")
        other = enqueue(jobs.add, 1, 2)
        assert [job.pk for job in run_jobs(["emails"])] == [email.pk]
        assert Job.objects.get(pk=other.pk).status == JobStatus.READY

    def test_a_database_error_in_a_job_leaves_the_test_transaction_usable(self):
        from django_dbjobs.models import Queue

        job = enqueue(jobs.violates_a_constraint)
        (ran,) = run_jobs()
        assert ran.pk == job.pk and ran.status == JobStatus.FAILED
        assert "IntegrityError" in ran.last_error
        assert not Queue.objects.filter(name="duplicate").exists()  # the job's writes rolled back
        assert connection.connection is not None and connection.is_usable()
        assert enqueue(jobs.add, 1, 1) and [j.status for j in run_jobs()] == [JobStatus.SUCCESSFUL]

    def test_include_scheduled_respects_queues(self):
        later_email = enqueue(jobs.send_email, "a@example.com", delay=3600)
        later_other = enqueue(jobs.add, 1, 2, delay=3600)
        assert [job.pk for job in run_jobs(["emails"], include_scheduled=True)] == [later_email.pk]
        assert Job.objects.get(pk=later_other.pk).status == JobStatus.READY

    def test_a_runaway_job_is_stopped(self):
        enqueue(jobs.forever)
        with pytest.raises(RuntimeError, match="ran 5 jobs and more are due"):
            run_jobs(max_jobs=5)

    def test_raise_errors_raises_the_failure_once_it_is_stored(self):
        failing = enqueue(jobs.always_fails, "kaput", max_attempts=1)
        with pytest.raises(ValueError, match="kaput"):
            run_jobs(raise_errors=True)
        job = Job.objects.get(pk=failing.pk)
        assert job.status == JobStatus.FAILED and job.last_error == "ValueError: kaput"
        assert run_jobs(raise_errors=True) == []

    def test_capture_jobs_sees_every_way_of_enqueueing(self):
        with capture_jobs() as captured:
            one = enqueue(jobs.add, 1, 2)
            many = enqueue_many(jobs.add, [(3, 4), (5, 6)])
        enqueue(jobs.add, 7, 8)  # after the block: not captured
        assert [job.pk for job in captured] == [one.pk, *(job.pk for job in many)]
        assert captured.names == ["tests.jobs.add"] * 3
        assert captured.named("tests.jobs.echo") == []


class TestInTestCase(RunJobsChecks, TestCase):
    def test_the_test_transaction_is_still_open_and_usable(self):
        enqueue(jobs.add, 1, 2)
        run_jobs()
        assert transaction.get_connection().in_atomic_block
        assert Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 1


class TestInTransactionTestCase(RunJobsChecks, TransactionTestCase):
    pass


@pytest.mark.django_db
def test_the_pytest_fixture_captures_and_runs(dbjobs):
    job = jobs.add.enqueue(2, 2)
    assert dbjobs.enqueued == [job]
    (ran,) = dbjobs.run()
    assert (ran.status, ran.return_value) == (JobStatus.SUCCESSFUL, 4)


QUIET_SCRIPT = """
import django
django.setup()
from django_dbjobs import enqueue
from django_dbjobs.testing import run_jobs
from tests import jobs
enqueue(jobs.always_fails, "kaput")
print(sorted(job.status for job in run_jobs(include_scheduled=True)))
"""


@pytest.mark.django_db(transaction=True)
def test_failures_are_not_printed_where_logging_is_not_configured():
    """As in a project's own test run under Django's runner: no handler for our log lines."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DBJOBS_TEST_DATABASE_NAME": str(connection.settings_dict["NAME"]),
        "PYTHONPATH": root,
    }
    done = subprocess.run(
        [sys.executable, "-c", QUIET_SCRIPT], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['FAILED', 'READY', 'READY']"
    assert done.stderr == "", "tracebacks reached the test output:\n" + done.stderr
