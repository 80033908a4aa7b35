"""Adaptive prefetch and batched acknowledgements, driven step by step in this process."""

import time

import pytest
from django.db import OperationalError

from django_dbjobs import bulk_enqueue, prepare
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.worker import Worker
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def test_prefetch_follows_recent_completions_up_to_the_setting():
    worker = Worker(concurrency=2, prefetch=10)
    assert worker.prefetch.size() == 0, "a fresh worker claims only for its free threads"
    now = time.monotonic()
    worker.prefetch._finished.extend([now - 5] * 50)  # long ago: slow jobs
    assert worker.prefetch.size() == 0
    worker.prefetch._finished.extend([now] * 4)
    assert worker.prefetch.size() == 4
    worker.prefetch._finished.extend([now] * 40)
    assert worker.prefetch.size() == 10


def test_claim_takes_free_threads_plus_prefetch_in_one_go():
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(30))
    worker = Worker(concurrency=2, prefetch=10)
    worker.prefetch._finished.extend([time.monotonic()] * 50)
    assert worker.claimer.claim_free_slots() == 12
    assert Job.objects.filter(status=JobStatus.RUNNING, worker=worker.id).count() == 12


def test_stopping_releases_prefetched_jobs_no_thread_started():
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(30))
    worker = Worker(concurrency=2, prefetch=10)
    worker.prefetch._finished.extend([time.monotonic()] * 50)
    worker.claimer.claim_free_slots()  # no threads are running: all 12 wait in the queue
    lost = next(iter(worker._held.ids()))
    Job.objects.filter(pk=lost).update(worker="new-owner")  # swept and taken meanwhile
    started = time.monotonic()
    worker._shutdown()
    assert time.monotonic() - started < 2, "prefetched jobs must not wait for the grace period"
    assert Job.objects.filter(status=JobStatus.READY, attempts=0, worker=None).count() == 29
    assert Job.objects.get(pk=lost).worker == "new-owner", "release is fenced on the owner"


def test_batched_successes_are_stored_together_and_fenced():
    bulk_enqueue(prepare(jobs.add, i, 1) for i in range(5))
    worker = Worker(concurrency=1, prefetch=10)
    worker.prefetch._finished.extend([time.monotonic()] * 50)
    worker.claimer.claim_free_slots()
    claimed = worker._held.all()
    Job.objects.filter(pk=claimed[0].pk).update(worker="someone-else")  # lost to a sweep
    for job in claimed:
        worker._acks.add(job, job.args[0] + 1)
    worker._acks.flush(force=True)
    rows = {j.pk: j for j in Job.objects.all()}
    assert rows[claimed[0].pk].status == JobStatus.RUNNING, "a lost job's outcome is dropped"
    for job in claimed[1:]:
        assert rows[job.pk].status == JobStatus.SUCCESSFUL
        assert rows[job.pk].return_value == job.args[0] + 1
        assert rows[job.pk].finished_at is not None


@pytest.mark.slow
def test_batched_completions_survive_kill_9(run_jobs, record_file):
    """Jobs finished but not yet acknowledged when the worker dies run again; none is lost."""
    import collections

    bulk_enqueue(prepare(jobs.record, i) for i in range(3000))
    worker = run_jobs("--concurrency", "2", "-v", "0", env={"DBJOBS_TEST_ACK_DELAY": "5"})
    from tests.conftest import wait_for

    assert wait_for(lambda: len(record_file.read_text().split()) > 500, 60)
    worker.process.kill()
    worker.process.wait()
    unacknowledged = set(record_file.read_text().split()) - {
        str(args[0])
        for args in Job.objects.filter(status=JobStatus.SUCCESSFUL).values_list("args", flat=True)
    }
    assert unacknowledged, "the kill should have caught some successes waiting for their batch"
    second = run_jobs("--concurrency", "2", "-v", "0")  # sweeps the killed worker's jobs
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 3000, 120)
    second.signal()
    assert second.wait() == 0
    runs = collections.Counter(record_file.read_text().split())
    assert len(runs) == 3000 and Job.objects.exclude(status=JobStatus.SUCCESSFUL).count() == 0
    assert {v for v, n in runs.items() if n > 1} <= unacknowledged | set(
        str(a[0]) for a in Job.objects.filter(attempts__gt=1).values_list("args", flat=True)
    )


def test_a_claim_that_committed_but_lost_its_answer_is_given_back_before_the_next():
    """The connection can break after the server committed a claim: the worker never
    learns which rows it took, and as it keeps heartbeating no sweep would free them."""
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(10))
    worker = Worker(concurrency=3, prefetch=0)
    worker._outage.pause = 0.01
    assert worker.claimer.claim_free_slots() == 3
    assert len(worker._threads.take_unstarted()) == 3  # as the job threads would
    done = worker._held.all()[0]
    worker._held.remove([done])
    worker._acks.add(done, 42)  # finished, its success not stored yet
    held = worker._held.ids() | {done.pk}

    real_claim = worker.claimer.claim

    def claim_then_lose_the_answer(limit):
        real_claim(limit)
        raise OperationalError("server closed the connection unexpectedly")

    worker.claimer.claim = claim_then_lose_the_answer
    assert worker.claimer.claim_free_slots() is None
    owned = set(Job.objects.filter(status=JobStatus.RUNNING, worker=worker.id).values_list("pk", flat=True))
    assert len(owned) == 4 and held < owned, "the failed claim committed all the same"

    del worker.claimer.claim
    assert worker.claimer.claim_free_slots() == 1
    owned_now = Job.objects.filter(status=JobStatus.RUNNING, worker=worker.id)
    assert set(owned_now.values_list("pk", flat=True)) == worker._held.ids() | {done.pk}, (
        "the rows of the failed claim were given back"
    )
    assert set(owned_now.values_list("attempts", flat=True)) == {1}, "the lost claim's attempt is refunded"
    assert not Job.objects.filter(status=JobStatus.READY, attempts__gt=0).exists()
    worker._acks.flush(force=True)
    assert Job.objects.get(pk=done.pk).return_value == 42, "a pending success is not given back"
