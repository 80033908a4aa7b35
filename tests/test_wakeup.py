"""Cross-process wake-ups: NOTIFY on PostgreSQL, data_version on SQLite, a probe on MariaDB."""

import threading
import time

import pytest
from django.db import connection, transaction

from django_dbjobs import bulk_enqueue, db, enqueue, enqueue_many, prepare
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from tests import jobs
from tests.conftest import restart_database, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def idle_worker(run_jobs):
    """A worker that would poll only every 60 s: anything faster is a wake-up."""
    worker = run_jobs("--poll-interval", "60")
    assert wait_for(lambda: WorkerProcess.objects.exists())
    time.sleep(0.5)  # past its first claim, LISTEN in place
    return worker


def test_idle_worker_in_another_process_is_woken_without_waiting_for_a_poll(run_jobs):
    worker = idle_worker(run_jobs)
    for _ in range(3):
        committed = time.monotonic()
        job = enqueue(jobs.add, 1, 2)
        assert wait_for(lambda j=job: Job.objects.filter(pk=j.pk, status=JobStatus.SUCCESSFUL).exists(), 5)
        assert time.monotonic() - committed < 2, "the worker waited for its poll"
    worker.signal()
    assert worker.wait() == 0


class Listening:
    """A second PostgreSQL connection that LISTENs like a worker does."""

    def __init__(self):
        import psycopg

        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        self.conn = psycopg.connect(**params, autocommit=True)
        self.conn.execute("LISTEN dbjobs")

    def received(self, wait: float) -> int:
        return len(list(self.conn.notifies(timeout=wait)))

    def close(self):
        self.conn.close()


@pytest.mark.skipif(not db.supports_listen(), reason="NOTIFY exists on PostgreSQL only")
def test_notify_is_delivered_on_commit_and_never_on_rollback():
    listener = Listening()
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            enqueue(jobs.add, 1, 1)
            raise RuntimeError
        assert listener.received(0.3) == 0, "a rolled-back enqueue notified"
        with transaction.atomic():
            enqueue(jobs.add, 1, 1)
            enqueue(jobs.add, 2, 2)
            assert listener.received(0.3) == 0, "notified before the commit"
        assert listener.received(1.0) == 1
    finally:
        listener.close()


@pytest.mark.skipif(not db.supports_listen(), reason="NOTIFY exists on PostgreSQL only")
def test_bulk_inserts_notify_once_on_commit():
    # enqueue_many() and bulk_enqueue() insert with INSERT ... SELECT inside a WITH: the
    # statement's trigger must still send the NOTIFY, on commit only.
    listener = Listening()
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            enqueue_many(jobs.add, [(1, 1), (2, 2)])
            raise RuntimeError
        assert listener.received(0.3) == 0, "a rolled-back enqueue_many() notified"
        enqueue_many(jobs.add, [(1, 1), (2, 2), (3, 3)])
        assert listener.received(1.0) == 1
        bulk_enqueue([prepare(jobs.add, 4, 4), prepare(jobs.add, 5, 5)])
        assert listener.received(1.0) == 1
    finally:
        listener.close()


@pytest.mark.slow
@pytest.mark.skipif(not db.supports_listen(), reason="NOTIFY exists on PostgreSQL only")
def test_worker_listens_again_after_a_postgresql_restart(run_jobs):
    worker = idle_worker(run_jobs)
    restart_database()
    assert wait_for(lambda: "LISTEN connection lost" in worker.output(), 10)
    time.sleep(2)  # let it reconnect; its 60 s poll cannot explain what follows
    job = enqueue(jobs.add, 3, 4)
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL).exists(), 5)
    assert worker.process.poll() is None
    worker.signal()
    assert worker.wait() == 0


def test_idle_waiter_in_this_process_notices_other_connections_commits():
    from django_dbjobs.wakeup import IdleWaiter

    waiter = IdleWaiter("default", threading.Event(), None)
    waiter.start()
    try:
        waiter.wait(0.05)
        if waiter.listener is not None:
            assert waiter.listener.listening.wait(5)

        def enqueue_elsewhere():
            time.sleep(0.2)
            enqueue(jobs.add, 1, 1)
            from django.db import connections

            connections.close_all()

        thread = threading.Thread(target=enqueue_elsewhere)
        started = time.monotonic()
        thread.start()
        assert waiter.wait(10) is True
        assert time.monotonic() - started < 2
        thread.join()
    finally:
        waiter.stop()
