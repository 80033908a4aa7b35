"""Jobs recovered from a dead worker run alone, so a later crash is charged to the right job."""

import datetime
import threading
import time

import pytest
from django.db.models.functions import Now

from django_dbjobs import bulk_enqueue, prepare
from django_dbjobs.models import Isolation, Job, JobStatus, WorkerProcess
from django_dbjobs.worker import Worker
from django_dbjobs.worker.leases.sweep import Sweeper
from django_dbjobs.worker.running.job_threads import AloneGate
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_holds_one_job_waiting_to_run_alone_and_gives_back_the_others():
    bulk_enqueue(prepare(jobs.add, i, i, priority=10 - i) for i in range(6))
    waiting = Job.objects.filter(priority__gte=8)  # the first three in claim order
    waiting.update(isolation=Isolation.WAITING)
    worker = Worker(concurrency=2, prefetch=10)
    worker.prefetch.job_finished(0.001)
    assert worker.claimer.claim_free_slots() == 4, "one waiting job and three others"
    held = Job.objects.filter(status=JobStatus.RUNNING, worker=worker.id)
    assert held.filter(isolation=Isolation.WAITING).count() == 1
    assert worker._held.alone == held.get(isolation=Isolation.WAITING).pk
    given_back = Job.objects.filter(status=JobStatus.READY, isolation=Isolation.WAITING)
    assert given_back.count() == 2
    assert list(given_back.values_list("attempts", "worker_ids")) == [(0, [])] * 2, "pickup undone"
    assert worker.claimer.claim_free_slots() == 0, "no second job to run alone while one is held"
    for job in worker._threads.take_unstarted():  # as if the job threads ran them all
        worker.job_done(job)
    assert worker._held.alone is None
    assert worker.claimer.claim_free_slots() == 1, "the next one, once the first is done"


def test_a_fresh_sweeper_waits_a_heartbeat_timeout_before_judging_workers(settings):
    settings.DBJOBS_HEARTBEAT_TIMEOUT = 0.5
    WorkerProcess.objects.create(id="dead", hostname="h", pid=1, concurrency=1)
    WorkerProcess.objects.filter(pk="dead").update(heartbeat_at=Now() - datetime.timedelta(seconds=60))
    bulk_enqueue([prepare(jobs.add, 1, 1)])
    Job.objects.claim("dead", 1)
    sweeper = Sweeper("me", "default")
    sweeper.sweep_if_due()
    assert Job.objects.get().status == JobStatus.RUNNING, (
        "right after an outage every heartbeat looks stale: a fresh worker must not judge yet"
    )
    time.sleep(0.6)
    sweeper.sweep_if_due()
    assert Job.objects.get().status == JobStatus.READY


def test_a_job_that_must_run_alone_waits_for_the_others_and_holds_them_back():
    events = []
    gate = AloneGate(lambda job: events.append(f"queued again {job}"))

    def other(name, seconds):
        assert gate.enter(name, alone=False)
        events.append(f"{name} starts")
        time.sleep(seconds)
        events.append(f"{name} ends")
        gate.leave(alone=False)

    def alone():
        assert gate.enter("alone", alone=True)
        events.append("alone starts")
        time.sleep(0.2)
        events.append("alone ends")
        gate.leave(alone=True)

    first = threading.Thread(target=other, args=("first", 0.3))
    first.start()
    time.sleep(0.05)
    gate.expect_alone()  # as JobThreads.submit() does before queueing it
    lone = threading.Thread(target=alone)
    lone.start()
    time.sleep(0.05)
    # A job taken after that is set aside, its thread free for the next job: never waited for.
    assert gate.enter("later", alone=False) is False
    for thread in (first, lone):
        thread.join(5)
    assert events == ["first starts", "first ends", "alone starts", "alone ends", "queued again later"]
    assert gate.enter("later", alone=False)


def test_jobs_claimed_ahead_of_one_that_must_run_alone_never_hold_every_thread():
    """Two threads, two jobs claimed ahead of one that must run alone: all of them run.

    Before, both threads waited at the gate with the jobs ahead of it, and the job that
    must run alone sat in the queue with no thread to take it: the worker hung for good.
    """
    bulk_enqueue(prepare(jobs.add, i, i, priority=10 - i) for i in range(4))
    Job.objects.filter(priority=8).update(isolation=Isolation.WAITING)  # third in claim order
    worker = Worker(concurrency=2, prefetch=10, burst=True)
    worker.prefetch.job_finished(0.001)  # jobs this short: claim ahead of the threads
    watchdog = threading.Timer(20, worker.stop)  # a hung worker is stopped: its jobs stay unrun
    watchdog.start()
    try:
        worker.run()
    finally:
        watchdog.cancel()
    states = list(Job.objects.values_list("priority", "status", "isolation"))
    assert Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 4, states


def test_a_burst_worker_recovers_a_dead_workers_jobs_before_it_exits(settings):
    settings.DBJOBS_HEARTBEAT_TIMEOUT = 0.5
    bulk_enqueue([prepare(jobs.add, 20, 22)])
    Job.objects.claim("dead-worker", 1)  # no worker row: its worker is gone
    Worker(burst=True).run()
    job = Job.objects.get()
    assert (job.status, job.return_value, job.attempts) == (JobStatus.SUCCESSFUL, 42, 1)
