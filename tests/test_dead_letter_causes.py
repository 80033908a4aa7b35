"""Every write that makes a job FAILED stores its cause (Job.error_fingerprint); a retry clears it."""

import datetime

import pytest
from django.db import transaction
from django.db.models.functions import Now

from django_dbjobs import batch, enqueue
from django_dbjobs.models import FailedJob, Isolation, Job, JobStatus, WorkerProcess
from django_dbjobs.observability.fingerprints import fingerprint
from django_dbjobs.testing import run_jobs
from django_dbjobs.worker.leases.sweep import sweep
from tests import jobs
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def cause_of(pk) -> str:
    """The stored cause of a dead letter, checked against its last error record."""
    job = Job.objects.get(pk=pk)
    assert job.status == JobStatus.FAILED
    assert job.error_fingerprint == fingerprint(job.errors[-1])
    return job.error_fingerprint


def test_failures_differing_only_in_ids_share_a_cause_and_another_frame_does_not():
    first, second = enqueue(jobs.declined, 1017), enqueue(jobs.declined, 2048)
    elsewhere = enqueue(jobs.refund_declined, 1017)
    run_jobs()
    assert cause_of(first.pk) == cause_of(second.pk)
    assert cause_of(elsewhere.pk) != cause_of(first.pk)


def test_a_worker_subprocess_stores_the_cause_of_its_dead_letters(run_jobs):
    first, second = enqueue(jobs.declined, 1), enqueue(jobs.declined, 99)
    worker = run_jobs("--burst")
    assert worker.wait() == 0, worker.output()
    assert cause_of(first.pk) == cause_of(second.pk)


def test_a_retried_attempt_stores_no_cause_and_the_last_one_does():
    job = enqueue(jobs.always_fails, "card 42")
    run_jobs(include_scheduled=True)
    assert Job.objects.get(pk=job.pk).attempts == 3
    assert cause_of(job.pk)


def test_the_sweep_stores_the_cause_of_a_job_lost_on_its_last_attempt():
    WorkerProcess.objects.create(id="dead", hostname="h", pid=1, concurrency=1)
    WorkerProcess.objects.filter(pk="dead").update(heartbeat_at=Now() - datetime.timedelta(seconds=60))
    job = enqueue(jobs.add, 1, 1, max_attempts=1)
    with transaction.atomic():
        (claimed,) = Job.objects.claim("dead", 1)
    Job.objects.filter(pk=job.pk).update(isolation=Isolation.STARTED)
    assert sweep("sweeper", timeout=30).failed == 1
    assert Job.objects.get(pk=job.pk).errors[-1]["exception_class_path"].endswith("WorkerLost")
    assert cause_of(job.pk)


def test_an_unknown_job_dead_lettered_after_its_grace_stores_its_cause():
    job = enqueue(jobs.add, 1, 1)
    (claimed,) = Job.objects.claim("w1", 1)
    error = {"exception_class_path": "django_dbjobs.exceptions.UnknownJob", "summary": "UnknownJob: x"}
    assert claimed.mark_unknown("w1", {**error, "traceback": "", "attempt": 1}, delay=1, grace=-1) == "FAILED"
    assert cause_of(job.pk) == claimed.error_fingerprint


def test_a_cancelled_job_of_a_batch_and_the_jobs_waiting_for_a_failed_one_store_their_causes():
    with batch(description="b"):
        waiting = enqueue(jobs.add, 1, 1)
    assert Job.objects.filter(pk=waiting.pk).cancel() == 1
    failed = enqueue(jobs.declined, 5)
    run_jobs()
    after = enqueue(jobs.add, 2, 2, after=[failed.pk])
    assert cause_of(waiting.pk) and cause_of(after.pk)
    assert cause_of(after.pk) != cause_of(waiting.pk)


def test_a_running_job_cancelled_stores_its_cause(run_jobs):
    job = enqueue(jobs.slow, 30)
    worker = run_jobs("--burst")
    assert wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.RUNNING)
    Job.objects.filter(pk=job.pk).cancel()
    assert worker.wait() == 0, worker.output()
    assert Job.objects.get(pk=job.pk).errors[-1]["exception_class_path"].endswith("JobCancelled")
    assert cause_of(job.pk)


def test_a_retry_clears_the_cause_and_the_next_failure_stores_it_again():
    job = enqueue(jobs.declined, 7)
    run_jobs()
    cause = cause_of(job.pk)
    assert FailedJob.objects.get(pk=job.pk).retry().retried == 1
    assert Job.objects.get(pk=job.pk).error_fingerprint is None
    run_jobs()
    assert cause_of(job.pk) == cause
