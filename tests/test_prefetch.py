"""Adaptive prefetch and batched acknowledgements, driven step by step in this process."""

import time

import pytest
from django.db import OperationalError

from django_dbjobs import bulk_enqueue, prepare
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.worker import Worker
from django_dbjobs.worker.claiming.prefetch import Prefetch
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def test_prefetch_is_about_a_tenth_of_a_second_of_work_up_to_the_setting():
    worker = Worker(concurrency=2, prefetch=10)
    assert worker.prefetch.size() == 0, "a fresh worker claims only for its free threads"
    worker.prefetch.job_finished(0.05)  # 2 threads, 50 ms a job: 4 jobs in 0.1 s
    assert worker.prefetch.size() == 4
    for _ in range(100):
        worker.prefetch.job_finished(0.001)  # fast jobs: capped by the setting
    assert worker.prefetch.size() == 10
    for _ in range(100):
        worker.prefetch.job_finished(1.0)  # slow jobs: none ahead
    assert worker.prefetch.size() == 0


def test_prefetch_pace_is_a_running_mean_of_job_times():
    prefetch = Prefetch(1000, threads=1)
    prefetch.job_finished(0.01)
    assert prefetch.size() == 10
    prefetch.job_finished(0.21)  # one slow job moves the mean a tenth of the way: 0.03 s
    assert prefetch.size() == 3


def test_an_idle_worker_claims_only_for_its_threads():
    prefetch = Prefetch(100, threads=1)
    prefetch.job_finished(0.001)
    assert prefetch.size() == 100
    prefetch._last -= 1  # nothing finished for a second
    assert prefetch.size() == 0, "after idling, a burst is shared with the other workers"


def test_a_busy_process_gets_full_claims_however_rarely_it_runs():
    """The pace is each job's own time, not the rate of finishing: a process that is off its
    core most of the time (many processes, few cores) still claims what it can run."""
    prefetch = Prefetch(100, threads=1)
    for _ in range(20):
        prefetch.job_finished(0.0002)
        time.sleep(0.004)  # descheduled between jobs: 5 jobs in 0.1 s
    assert prefetch.size() == 100


def test_claim_takes_free_threads_plus_prefetch_in_one_go():
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(30))
    worker = Worker(concurrency=2, prefetch=10)
    worker.prefetch.job_finished(0.001)  # fast jobs: a full prefetch
    assert worker.claimer.claim_free_slots() == 12
    assert Job.objects.filter(status=JobStatus.RUNNING, worker=worker.id).count() == 12


def test_stopping_releases_prefetched_jobs_no_thread_started():
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(30))
    worker = Worker(concurrency=2, prefetch=10)
    worker.prefetch.job_finished(0.001)  # fast jobs: a full prefetch
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
    worker.prefetch.job_finished(0.001)  # fast jobs: a full prefetch
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


def run_queue(worker, count):
    """Take, run and finish `count` jobs as the job thread does; what woke the loop each time."""
    seen = []
    for _ in range(count):
        worker._wake.clear()
        job = worker._threads._take()
        taken = worker._wake.is_set()
        worker._wake.clear()
        worker.job_done(job, 0.001)
        seen.append((worker._threads.queued(), taken, worker._wake.is_set()))
    return seen


def test_the_loop_is_woken_only_when_a_thread_will_want_a_job():
    """Woken after every job, the loop ran a whole turn per job (see Worker.job_done())."""
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(30))
    worker = Worker(concurrency=1, prefetch=10)
    worker.prefetch.job_finished(0.001)
    assert worker.claimer.claim_free_slots() == 11  # no threads run: all 11 wait in the queue
    assert not worker.claimer.came_short
    seen = run_queue(worker, 11)
    assert seen[:-1] == [(left, False, False) for left in range(10, 0, -1)]
    assert seen[-1] == (0, True, True), "the last one taken: claim while it runs; done: none to take"


def test_after_a_short_claim_taking_the_last_job_does_not_wake_the_loop():
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(3))
    worker = Worker(concurrency=1, prefetch=10)
    worker.prefetch.job_finished(0.001)
    assert worker.claimer.claim_free_slots() == 3
    assert worker.claimer.came_short, "nothing more was due: nothing to claim ahead"
    assert run_queue(worker, 3) == [(2, False, False), (1, False, False), (0, False, True)]


def test_a_finished_job_wakes_a_stopping_worker():
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(3))
    worker = Worker(concurrency=1, prefetch=10)
    worker.prefetch.job_finished(0.001)
    assert worker.claimer.claim_free_slots() == 3
    worker._stopping = True
    worker._wake.clear()
    worker.job_done(worker._threads._tasks.get_nowait(), 0.001)
    assert worker._threads.queued() == 2
    assert worker._wake.is_set(), "a stopping worker waits for its jobs to finish"


def test_the_first_success_of_a_batch_wakes_the_loop_to_store_it_in_time():
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(3))
    worker = Worker(concurrency=1, prefetch=10)
    worker.prefetch.job_finished(0.001)
    worker.claimer.claim_free_slots()
    first, second, _third = worker._held.all()
    worker._wake.clear()
    worker._acks.add(first, 1)
    assert worker._wake.is_set(), "the loop must wait no longer than DBJOBS_ACK_DELAY"
    worker._wake.clear()
    worker._acks.add(second, 2)
    assert not worker._wake.is_set(), "the batch's due time is known already"
    assert worker._acks.due_in() is not None


def test_a_job_deadline_wakes_a_loop_that_would_sleep_past_it():
    import threading

    from django_dbjobs.worker.running import deadlines, interrupts

    event = threading.Event()
    deadlines.subscribe(event)
    armed = interrupts.Armed(job=None, thread=threading.get_ident(), seconds=30.0, deadline=0.0)
    try:
        deadlines.looks_at(event, time.monotonic() + 60)  # a loop waiting a minute
        deadlines.arm(armed)
        assert event.is_set(), "the loop must wait no longer than the deadline"
        assert 29 < deadlines.due_in() <= 30
        interrupts.disarm(armed)
        event.clear()
        deadlines.looks_at(event, time.monotonic() + 1)  # back within a second: in time
        deadlines.arm(armed)
        assert not event.is_set(), "a loop that looks again before the deadline is left alone"
        interrupts.disarm(armed)
    finally:
        deadlines.unsubscribe(event)
    deadlines.arm(armed)
    interrupts.disarm(armed)
    assert not event.is_set(), "unsubscribed"


def test_taking_a_job_wakes_the_loop_when_fewer_than_the_threads_are_left_waiting():
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(30))
    worker = Worker(concurrency=2, prefetch=10)
    worker.prefetch.job_finished(0.001)
    assert worker.claimer.claim_free_slots() == 12
    woken = []
    for _ in range(12):
        worker._wake.clear()
        worker._threads._take()
        woken.append((worker._threads.queued(), worker._wake.is_set()))
    assert [left for left, set_ in woken if set_] == [1], "only as it falls below the threads"


def test_a_claim_that_fills_its_slots_is_not_short():
    bulk_enqueue(prepare(jobs.add, i, i) for i in range(30))
    worker = Worker(concurrency=2, prefetch=10)
    worker.prefetch.job_finished(0.001)
    assert worker.claimer.claim_free_slots() == 12
    assert not worker.claimer.came_short
    assert worker.claimer.claim_free_slots() == 0  # the queue is full: no claim
    assert not worker.claimer.came_short
