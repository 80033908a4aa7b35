import datetime

import pytest
from django.db import transaction
from django.db.models.functions import Now

from django_dbjobs import enqueue, execution
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from django_dbjobs.sweep import sweep
from tests import jobs

pytestmark = pytest.mark.django_db


def register(worker_id, seconds_ago=0.0):
    WorkerProcess.objects.create(id=worker_id, hostname="h", pid=1, concurrency=1)
    WorkerProcess.objects.filter(pk=worker_id).update(
        heartbeat_at=Now() - datetime.timedelta(seconds=seconds_ago)
    )


def claim(worker):
    with transaction.atomic():
        return Job.objects.claim(worker, 1)[0]


def test_jobs_of_a_live_worker_are_never_touched():
    register("live", seconds_ago=0)
    enqueue(jobs.add, 1, 1)
    claim("live")
    result = sweep("sweeper", timeout=30)
    assert (result.requeued, result.failed) == (0, 0)
    assert Job.objects.get().status == JobStatus.RUNNING


def test_job_of_a_silent_worker_is_requeued_with_a_worker_lost_error():
    register("dead", seconds_ago=60)
    enqueue(jobs.add, 1, 1)
    claim("dead")
    result = sweep("sweeper", timeout=30)
    assert (result.requeued, result.failed, result.workers_removed) == (1, 0, 1)
    job = Job.objects.get()
    assert (job.status, job.worker, job.attempts) == (JobStatus.READY, None, 1)
    assert job.errors[0]["exception_class_path"] == "django_dbjobs.exceptions.WorkerLost"
    assert job.worker_ids == ["dead"]
    assert not WorkerProcess.objects.filter(pk="dead").exists()


def test_job_whose_worker_row_is_missing_is_requeued():
    enqueue(jobs.add, 1, 1)
    claim("vanished")
    assert sweep("sweeper", timeout=30).requeued == 1


def test_job_that_lost_its_worker_on_every_attempt_is_dead_lettered():
    enqueue(jobs.add, 1, 1, max_attempts=2, unique_key="k")
    for attempt in (1, 2):
        claim(f"dead-{attempt}")
        sweep("sweeper", timeout=30)
    job = Job.objects.get()
    assert (job.status, job.attempts, job.active_key) == (JobStatus.FAILED, 2, None)
    assert len(job.errors) == 2 and "WorkerLost" in job.last_error


def test_the_sweeper_never_sweeps_its_own_jobs():
    enqueue(jobs.add, 1, 1)
    claim("me")
    assert sweep("me", timeout=30).requeued == 0


def test_a_swept_worker_cannot_finish_the_job_afterwards():
    enqueue(jobs.add, 1, 1)
    stale = claim("frozen")
    sweep("sweeper", timeout=30)
    fresh = claim("frozen")  # the same worker claims the job again: attempt 2
    assert execution.run(stale, "frozen") is None, "the old attempt's outcome must be dropped"
    assert execution.run(fresh, "frozen") == JobStatus.SUCCESSFUL
    job = Job.objects.get()
    assert (job.status, job.attempts) == (JobStatus.SUCCESSFUL, 2)


def test_two_sweepers_recover_each_job_once():
    enqueue(jobs.add, 1, 1)
    claim("dead")
    first = sweep("a", timeout=30)
    second = sweep("b", timeout=30)
    assert first.requeued + second.requeued == 1
    assert len(Job.objects.get().errors) == 1
