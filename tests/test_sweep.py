import datetime
import threading
import time

import pytest
from django.db import connections, transaction
from django.db.models.functions import Now

from django_dbjobs import db, enqueue
from django_dbjobs.models import Isolation, Job, JobStatus, WorkerProcess
from django_dbjobs.worker.leases.sweep import sweep
from django_dbjobs.worker.running import execution
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


def claim_alone(worker):
    """Claim the job and start it alone, as a worker does with a job recovered from a crash."""
    job = claim(worker)
    assert job.isolation == Isolation.WAITING
    assert job.mark_started_alone(worker)
    return job


def test_job_of_a_silent_worker_goes_back_uncharged_to_run_alone():
    register("dead", seconds_ago=60)
    enqueue(jobs.add, 1, 1)
    claim("dead")
    result = sweep("sweeper", timeout=30)
    assert (result.given_back, result.requeued, result.failed, result.workers_removed) == (1, 0, 0, 1)
    job = Job.objects.get()
    assert (job.status, job.worker, job.attempts, job.pickups) == (JobStatus.READY, None, 0, 1)
    assert job.isolation == Isolation.WAITING, "it may have started: it runs alone next time"
    assert job.worker_ids == [] and job.errors == [], "no attempt was charged, none is reported"
    assert not WorkerProcess.objects.filter(pk="dead").exists()


def test_a_job_that_was_running_alone_is_charged_with_a_worker_lost_error():
    enqueue(jobs.add, 1, 1)
    claim("dead")
    sweep("sweeper", timeout=30)
    claim_alone("dead-again")
    result = sweep("sweeper", timeout=30)
    assert (result.given_back, result.requeued, result.failed) == (0, 1, 0)
    job = Job.objects.get()
    assert (job.status, job.attempts, job.isolation) == (JobStatus.READY, 1, Isolation.WAITING)
    assert job.errors[0]["exception_class_path"] == "django_dbjobs.exceptions.WorkerLost"
    assert job.worker_ids == ["dead-again"]


def test_job_whose_worker_row_is_missing_is_given_back():
    enqueue(jobs.add, 1, 1)
    claim("vanished")
    assert sweep("sweeper", timeout=30).given_back == 1


def test_job_that_lost_its_worker_on_every_attempt_is_dead_lettered():
    enqueue(jobs.add, 1, 1, max_attempts=2, unique_key="k")
    claim("dead-0")  # the first loss is not charged: nobody knows the job had started
    sweep("sweeper", timeout=30)
    for attempt in (1, 2):
        claim_alone(f"dead-{attempt}")
        sweep("sweeper", timeout=30)
    job = Job.objects.get()
    assert (job.status, job.attempts, job.active_key) == (JobStatus.FAILED, 2, None)
    assert (job.pickups, job.isolation) == (3, Isolation.NONE)
    assert len(job.errors) == 2 and "WorkerLost" in job.last_error


def test_the_sweeper_never_sweeps_its_own_jobs():
    enqueue(jobs.add, 1, 1)
    claim("me")
    assert sweep("me", timeout=30).given_back == 0


def test_a_swept_worker_cannot_finish_the_job_afterwards():
    enqueue(jobs.add, 1, 1)
    stale = claim("frozen")
    sweep("sweeper", timeout=30)
    fresh = claim("frozen")  # the same worker claims the job again: same attempt, new pickup
    assert (stale.attempts, fresh.attempts, fresh.pickups) == (1, 1, 2)
    assert execution.run(stale, "frozen") is None, "the old pickup's outcome must be dropped"
    assert execution.run(fresh, "frozen") == JobStatus.SUCCESSFUL
    job = Job.objects.get()
    assert (job.status, job.attempts, job.isolation) == (JobStatus.SUCCESSFUL, 1, Isolation.NONE)


def test_two_sweepers_recover_each_job_once():
    enqueue(jobs.add, 1, 1)
    claim("dead")
    sweep("a", timeout=30)
    claim_alone("dead-alone")
    first = sweep("a", timeout=30)
    second = sweep("b", timeout=30)
    assert first.requeued + second.requeued == 1
    assert len(Job.objects.get().errors) == 1


def _hold_row(pk, locked, release):
    """Hold the job's row in a transaction of another connection, as a frozen job's own
    transaction.atomic() around a checkpoint() would."""
    try:
        with transaction.atomic():
            Job.objects.filter(pk=pk).update(checkpoint_state={"held": True})
            locked.set()
            release.wait(10)
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not db.can_skip_locked(), reason="SQLite: a writing transaction holds the whole database")
def test_a_job_whose_row_another_transaction_holds_is_left_for_a_later_sweep_without_waiting():
    register("dead", seconds_ago=60)
    enqueue(jobs.add, 1, 1)
    job = claim("dead")
    locked, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_row, args=(job.pk, locked, release))
    holder.start()
    try:
        assert locked.wait(10)
        started = time.monotonic()
        result = sweep("sweeper", timeout=30)
        took = time.monotonic() - started
    finally:
        release.set()
        holder.join(10)
    assert took < 1.0, took
    assert (result.given_back, result.workers_removed) == (0, 1)
    assert Job.objects.get().status == JobStatus.RUNNING
    assert sweep("sweeper", timeout=30).given_back == 1, "recovered once the transaction ended"
    assert Job.objects.get().status == JobStatus.READY
