"""The worker as users run it: real run_jobs subprocesses and real signals."""

import collections
import re
import signal
import threading
import time

import pytest
from django.db import connection, connections

from django_dbjobs import bulk_enqueue, enqueue, prepare
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from django_dbjobs.worker import Worker
from tests import jobs
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_committed_job_is_run_by_a_worker_in_another_process(run_jobs):
    job = enqueue(jobs.add, 20, 22)
    worker = run_jobs("--burst")
    assert worker.wait() == 0, worker.output()
    job.refresh_from_db()
    assert (job.status, job.return_value, job.attempts) == (JobStatus.SUCCESSFUL, 42, 1)
    assert WorkerProcess.objects.count() == 0, "a clean exit removes the worker row"


@pytest.mark.slow
def test_two_workers_drain_2000_jobs_without_running_any_twice(run_jobs, record_file):
    # 3 ms a job: long enough that the second process starts before the first has
    # drained everything (a no-op job queue empties in well under its start-up time).
    bulk_enqueue(prepare(jobs.sleep_then_record, 0.003, i) for i in range(2000))
    workers = [run_jobs("--burst", "--concurrency", "2", "-v", "0") for _ in range(2)]
    for worker in workers:
        assert worker.wait(timeout=240) == 0, worker.output()
    runs = collections.Counter(record_file.read_text().split())
    assert len(runs) == 2000
    assert max(runs.values()) == 1, [v for v, n in runs.items() if n > 1][:10]
    assert Job.objects.exclude(status=JobStatus.SUCCESSFUL).count() == 0
    assert set(Job.objects.values_list("attempts", flat=True)) == {1}
    assert len({w for ids in Job.objects.values_list("worker_ids", flat=True) for w in ids}) == 2


def test_worker_only_takes_its_queues(run_jobs):
    emails = enqueue(jobs.add, 1, 1, queue="emails")
    other = enqueue(jobs.add, 2, 2, queue="other")
    worker = run_jobs("--burst", "--queues", "emails,payments")
    assert worker.wait() == 0, worker.output()
    assert Job.objects.get(pk=emails.pk).status == JobStatus.SUCCESSFUL
    assert Job.objects.get(pk=other.pk).status == JobStatus.READY


def test_burst_exits_at_once_on_an_empty_queue_and_leaves_future_jobs(run_jobs):
    later = enqueue(jobs.add, 1, 1, delay=3600)
    worker = run_jobs("--burst")
    assert worker.wait(timeout=30) == 0, worker.output()
    assert Job.objects.get(pk=later.pk).status == JobStatus.READY


def test_max_jobs_stops_after_that_many(run_jobs):
    for i in range(5):
        enqueue(jobs.add, i, i)
    worker = run_jobs("--max-jobs", "3")
    assert worker.wait() == 0, worker.output()
    assert Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 3
    assert Job.objects.ready().count() == 2


def test_sigterm_lets_the_running_job_finish_and_exits_zero(run_jobs, record_file):
    job = enqueue(jobs.announce_sleep_record, 2, "done")
    worker = run_jobs("--shutdown-grace", "15")
    # Begun, not only claimed: a claimed job no thread has started is given back on SIGTERM.
    assert wait_for(lambda: "started:done" in record_file.read_text())
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0, worker.output()
    assert time.monotonic() - started < 15
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESSFUL
    assert record_file.read_text() == "started:done\ndone\n"


def test_sigterm_releases_a_job_still_running_after_the_grace(run_jobs):
    job = enqueue(jobs.sleep_then_record, 30, "never")
    worker = run_jobs("--shutdown-grace", "1")
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exists())
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0, worker.output()
    assert time.monotonic() - started < 10
    job.refresh_from_db()
    assert (job.status, job.attempts, job.worker) == (JobStatus.READY, 0, None)


def test_second_signal_releases_and_exits_at_once(run_jobs):
    job = enqueue(jobs.sleep_then_record, 30, "never")
    worker = run_jobs("--shutdown-grace", "25")
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exists())
    started = time.monotonic()
    worker.signal(signal.SIGINT)
    time.sleep(0.3)
    worker.signal(signal.SIGINT)
    assert worker.wait(timeout=15) == 0, worker.output()
    assert time.monotonic() - started < 10
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.READY, 0)


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no POSIX signal masks here")
def test_stop_signals_never_interrupt_the_threads_that_use_the_database():
    """SIGTERM/SIGINT are blocked in every worker thread and taken by one sigwait() thread,
    so no database driver call is interrupted; afterwards everything is as before."""
    job = enqueue(jobs.blocked_signals)
    before = signal.getsignal(signal.SIGTERM), signal.pthread_sigmask(signal.SIG_BLOCK, [])
    Worker(burst=True).run()  # in the main thread, as run_jobs runs it
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESSFUL
    assert {int(signal.SIGTERM), int(signal.SIGINT)} <= set(job.return_value)
    assert (signal.getsignal(signal.SIGTERM), signal.pthread_sigmask(signal.SIG_BLOCK, [])) == before
    assert not [t for t in threading.enumerate() if t.name == "dbjobs-signals"], "signal thread ended"


def test_worker_in_this_process_is_woken_by_commit(settings):
    worker = Worker(poll_interval=30)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        time.sleep(0.5)  # let it go idle on its 30 s poll
        job = enqueue(jobs.add, 2, 3)
        assert wait_for(
            lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL).exists(), timeout=5
        ), "the commit did not wake the idle worker"
    finally:
        worker.stop()
        thread.join(10)
        connections.close_all()
    assert not thread.is_alive()


def kill_other_connections():
    """Drop every other session on the test database, as a database restart would."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        else:
            cursor.execute(
                "SELECT id FROM information_schema.processlist "
                "WHERE db = DATABASE() AND id <> CONNECTION_ID()"
            )
            for (session,) in cursor.fetchall():
                cursor.execute(f"KILL {int(session)}")


def test_idle_worker_survives_losing_its_connection(run_jobs):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no server connection to lose")
    worker = run_jobs("--poll-interval", "0.1")
    assert wait_for(lambda: WorkerProcess.objects.exists())
    time.sleep(0.3)
    kill_other_connections()
    time.sleep(0.5)
    job = enqueue(jobs.add, 4, 5)
    assert wait_for(
        lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL).exists(), timeout=20
    ), "worker did not resume after losing its connection"
    assert worker.process.poll() is None, "the worker exited"
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    # The lost session surfaces in whichever query runs next: claim, sweep or heartbeat.
    assert re.search(r"Database error while (claiming|sweeping)|Heartbeat failed", worker.output())
