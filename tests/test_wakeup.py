"""Cross-process wake-ups: NOTIFY on PostgreSQL, data_version on SQLite, a probe on MariaDB."""

import select
import threading
import time

import pytest
from django.db import connection, transaction

from django_dbjobs import bulk_enqueue, db, enqueue, enqueue_many, prepare
from django_dbjobs.db.listen import SCHEDULES_PAYLOAD
from django_dbjobs.enqueuing import wakeup
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from django_dbjobs.worker.lifecycle.idle_wait import IdleWaiter
from django_dbjobs.worker.lifecycle.wake_event import WakeEvent
from tests import jobs
from tests.conftest import restart_database, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def idle_worker(run_jobs, env: dict | None = None):
    """A worker that would poll only every 60 s: anything faster is a wake-up."""
    worker = run_jobs("--poll-interval", "60", env=env)
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

    def payloads(self, wait: float) -> list[str]:
        return [notification.payload for notification in self.conn.notifies(timeout=wait)]

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
@pytest.mark.restarts_database
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
    waiter = IdleWaiter("default", WakeEvent(), None)
    waiter.start()
    try:
        waiter.wait(0.05)
        assert waiter.listening == db.supports_listen()

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
        # Seen by its own probe (MariaDB, SQLite), not a NOTIFY: the loop pauses after such a
        # wake-up whose claim takes nothing (loop._claim_woken()); this process's event is not.
        assert waiter.probed is not db.supports_listen()
        waiter.event.set()
        assert waiter.wait(10) is True
        assert waiter.probed is False
    finally:
        waiter.stop()


def readable(event: WakeEvent) -> bool:
    return bool(select.select([event], [], [], 0)[0])


def test_a_wake_event_is_readable_exactly_while_it_is_set():
    event = WakeEvent()
    try:
        assert not readable(event) and not event.is_set()
        event.set()
        event.set()
        assert readable(event) and event.is_set()
        assert event.wait(0)
        event.clear()
        assert not readable(event) and not event.is_set()
        event.clear()
        event.set()
        assert readable(event)
        setter = threading.Timer(0.1, event.clear)  # another thread's clear() is seen too
        setter.start()
        setter.join()
        assert not readable(event)
    finally:
        event.close()
    event.set()  # closed: still an Event, and a late set() from a job thread does not raise
    assert event.is_set()
    early = WakeEvent()  # set before anyone polls it: its socket pair is made readable
    early.set()
    assert readable(early)
    early.close()
    WakeEvent().close()  # never polled: nothing to free


needs_listen = pytest.mark.skipif(not db.supports_listen(), reason="NOTIFY exists on PostgreSQL only")


def notify(payload: str = "") -> None:
    listener = Listening()  # any other connection
    try:
        listener.conn.execute("SELECT pg_notify('dbjobs', %s)", [payload])
    finally:
        listener.close()


@needs_listen
def test_a_notify_ends_the_wait_whether_or_not_the_worker_would_probe(waiter):
    for probe in (True, False):
        threading.Timer(0.2, notify).start()
        started = time.monotonic()
        assert waiter.wait(10, probe=probe) is True
        assert 0.15 < time.monotonic() - started < 2
        assert not waiter.event.is_set()
    started = time.monotonic()
    assert waiter.wait(0.3) is False, "woken with nothing sent"
    assert time.monotonic() - started >= 0.29


@needs_listen
def test_a_schedule_notify_wakes_the_scheduler_too(waiter):
    before = wakeup.schedule_generation()
    threading.Timer(0.1, notify, [SCHEDULES_PAYLOAD]).start()
    assert waiter.wait(10) is True
    assert wakeup.schedule_generation() == before + 1


@needs_listen
def test_a_listen_connection_closed_by_the_server_is_opened_again(waiter, caplog):
    pid = waiter.listen.connection.connection.pgconn.backend_pid
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="django_dbjobs"):
        # Closed, then opened again after its pause: notifications sent meanwhile are
        # lost, so the waiter wakes the worker to look.
        assert waiter.wait(10) is True
    assert "LISTEN connection lost, reconnecting in 0.5s" in caplog.text
    assert 0.4 < time.monotonic() - started < 5
    assert waiter.listening
    threading.Timer(0.1, notify).start()
    assert waiter.wait(10) is True
    assert waiter.wait(0.2) is False


@needs_listen
def test_the_wait_takes_descriptors_numbered_past_select_s_limit():
    """A worker with many threads and files has descriptors past 1023, where select() fails."""
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"at most {hard} open files here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    spare = [os.dup(0) for _ in range(1100)]
    event = WakeEvent()
    waiter = IdleWaiter("default", event, None)
    try:
        waiter.start()
        assert event.fileno() > 1024
        waiter.wait(1)
        threading.Timer(0.1, notify).start()
        assert waiter.wait(10) is True
    finally:
        waiter.stop()
        event.close()
        for fd in spare:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@needs_listen
def test_a_busy_worker_still_reads_its_notifications(waiter):
    """A wait the event ends at once still takes what arrived: a LISTEN backend whose client
    never reads blocks on sending, holding back the server's notification queue."""
    for _ in range(5):
        notify()
    time.sleep(0.3)  # delivered to the socket
    waiter.event.set()  # a job thread wants work: the wait returns at once
    assert waiter.wait(10, probe=False) is True
    assert waiter.listen.read() == (0, 0, 0), "the notifications were left unread"


@needs_listen
def test_the_listen_connection_has_a_connect_timeout_and_keepalives_unless_options_say_otherwise(waiter):
    from django_dbjobs.db.listen import CONNECTION_DEFAULTS

    parameters = waiter.listen.connection.connection.info.get_parameters()
    for name, value in CONNECTION_DEFAULTS.items():
        assert parameters.get(name) == str(value), (name, parameters)


def test_a_worker_whose_job_just_ended_still_looks_for_other_processes_jobs(run_jobs, record_file):
    """The job's end wakes the loop (a free thread), whose claim then finds nothing: the next
    wait must be the idle one, which probes (MariaDB) or reads data_version (SQLite). A
    wait that does not (the pause after a short claim, 50 ms) made each job enqueued just
    after another ended wait for it: 26 ms at p50 on MariaDB instead of 11. Here that pause
    lasts a second, so a wait that does not look stands out from a loaded machine's slow
    wake-ups (46 ms at p50 once, in a 6-session run). (On PostgreSQL a NOTIFY ends that
    pause too: there it checks only that the wake-up stays quick.)"""
    # A claim of one job comes back short (free slots: its prefetch): the pause follows.
    worker = idle_worker(run_jobs, env={"DBJOBS_TEST_DRAINED_RECHECK": "1"})
    latencies = []
    for n in range(8):
        committed = time.monotonic()
        enqueue(jobs.record, n)
        assert wait_for(lambda n=n: f"{n}\n" in record_file.read_text(), 5, interval=0.001)
        latencies.append(time.monotonic() - committed)
        time.sleep(0.005)  # the job has ended (it only writes a line): its thread is free
    latencies.sort()
    assert latencies[len(latencies) // 2] < 0.3, f"waited without looking: {latencies}"
    worker.signal()
    assert worker.wait() == 0


def test_an_idle_waiter_says_how_it_wakes_for_the_start_line(settings):
    """The "Worker started" line's wakeups=: LISTEN on PostgreSQL straight to the server (the
    way through a pooler: tests/test_pgbouncer.py), the probe on MySQL/MariaDB, data_version
    on SQLite; DBJOBS_LISTEN_DATABASE naming the worker's own alias (for all workers, or for
    its alias), or naming one for other workers' alias only, changes nothing."""
    expected = {"postgresql": "listen", "mysql": "probe", "sqlite": "data_version"}[connection.vendor]
    for listen_database in (None, "default", {"default": "default"}, {"direct": "default"}):
        settings.DBJOBS_LISTEN_DATABASE = listen_database
        waiter = IdleWaiter("default", WakeEvent(), None)
        waiter.start()
        try:
            assert waiter.way == expected
            assert waiter.listening == (expected == "listen")
        finally:
            waiter.stop()
