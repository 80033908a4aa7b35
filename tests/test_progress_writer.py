"""The worker's progress writes (worker/running/progress_writer.py, models/progress_store.py), driven
directly on real connections: at most once a second, none without new reports, never waiting for a lock."""

import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from django_dbjobs import db, enqueue
from django_dbjobs.context import running
from django_dbjobs.db.outage import Outage
from django_dbjobs.models import Job
from django_dbjobs.models.progress import Progress
from django_dbjobs.worker.claiming.held import HeldJobs
from django_dbjobs.worker.identity import Identity
from django_dbjobs.worker.running.progress_writer import ProgressWriter
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)

WORKER = "h:1:progress"


def claimed(count: int) -> tuple[ProgressWriter, list[Job]]:
    """`count` jobs claimed by WORKER and held, and a writer for them."""
    for number in range(count):
        enqueue(jobs.add, number, 1)
    claimed = Job.objects.claim(WORKER, limit=count)
    held = HeldJobs()
    held.add(claimed)
    return ProgressWriter(Identity(WORKER, "default"), held, Outage("default")), claimed


def report(job: Job, done: float, total: float | None = None, note: str = "") -> None:
    with running(job):
        job.progress(done, total=total, note=note)


def stored(job: Job) -> Progress | None:
    return Progress.from_record(Job.objects.get(pk=job.pk).progress_state)


def test_no_query_while_no_held_job_has_a_new_report():
    writer, (job,) = claimed(1)
    with CaptureQueriesContext(connection) as queries:
        writer.write_if_due()
        assert writer.write_now() == 0
    assert len(queries) == 0
    report(job, 1)
    assert writer.write_now() == 1
    with CaptureQueriesContext(connection) as queries:  # written already: nothing new
        assert writer.write_now() == 0
    assert len(queries) == 0


def test_many_reports_are_one_write_a_second_for_every_job_at_once():
    writer, (first, second) = claimed(2)
    for done in range(1, 501):
        report(first, done, total=1000, note="first")
        report(second, done * 2, note="second")
    with CaptureQueriesContext(connection) as queries:
        writer.write_if_due()
    updates = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    assert len(updates) == 1  # both jobs in one statement
    assert (stored(first).done, stored(first).total, stored(first).note) == (500, 1000, "first")
    assert (stored(second).done, stored(second).total) == (1000, None)
    assert first.pending_progress() is None and second.pending_progress() is None
    report(first, 600, total=1000)
    with CaptureQueriesContext(connection) as queries:  # within the second: not yet
        writer.write_if_due()
    assert len(queries) == 0 and stored(first).done == 500
    assert 0.9 < writer.due_in() <= 1.0
    time.sleep(writer.due_in())
    writer.write_if_due()
    assert stored(first).done == 600 and stored(second).done == 1000


def test_a_job_this_worker_no_longer_owns_is_not_written():
    writer, (mine, lost) = claimed(2)
    Job.objects.filter(pk=lost.pk).update(worker="h:2:other")
    report(mine, 1)
    report(lost, 1)
    assert writer.write_now() == 1
    assert stored(mine).done == 1 and stored(lost) is None
    assert lost.pending_progress() is not None  # never said stored


def test_a_new_pickup_of_the_job_is_not_written_with_the_old_ones_report():
    writer, (job,) = claimed(1)
    Job.objects.filter(pk=job.pk).update(pickups=job.pickups + 1)  # lost, and claimed again by this worker
    report(job, 1)
    assert writer.write_now() == 0
    assert stored(job) is None


def hold(job: Job, locked: threading.Event, release: threading.Event) -> None:
    """Hold `job`'s row (SQLite: the database's write lock) in a transaction of another connection."""
    try:
        with transaction.atomic():
            Job.objects.filter(pk=job.pk).update(checkpoint_state={"held": True})
            locked.set()
            release.wait(10)
    finally:
        connections.close_all()


def test_a_row_held_by_another_transaction_is_skipped_at_once_and_written_next_time():
    """A job's own transaction (a checkpoint() inside transaction.atomic) holds its row: the
    worker's loop must never wait for it. PostgreSQL and MySQL/MariaDB skip that row and write
    the others; SQLite, whose writing transaction holds the whole database, writes nothing."""
    writer, (busy, free) = claimed(2)
    locked, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold, args=(busy, locked, release))
    holder.start()
    try:
        assert locked.wait(10)
        report(busy, 1)
        report(free, 1)
        started = time.monotonic()
        written = writer.write_now()
        took = time.monotonic() - started
    finally:
        release.set()
        holder.join(10)
    assert took < 0.5, took
    assert busy.pending_progress() is not None and stored(busy) is None
    if db.can_skip_locked():
        assert written == 1 and stored(free).done == 1
    else:
        assert written == 0 and free.pending_progress() is not None
    assert writer.write_now() == (1 if db.can_skip_locked() else 2)
    assert stored(busy).done == 1 and stored(free).done == 1
    # The writer put SQLite's busy timeout back for the loop's other writes.
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout")
            timeout = connection.settings_dict["OPTIONS"].get("timeout", 5)
            assert cursor.fetchone()[0] == int(timeout * 1000) > 0


@pytest.mark.skipif(connection.vendor == "sqlite", reason="SQLite has no server connection to lose")
def test_an_outage_costs_the_loop_one_short_pause_and_the_write_is_made_next_time():
    writer, (job,) = claimed(1)
    errors = []
    writer.outage = Outage("default", on_error=lambda: errors.append(1))
    report(job, 3)
    with connection.cursor() as cursor:  # our own session dies, as in an outage
        try:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            else:
                cursor.execute("KILL CONNECTION_ID()")
        except Exception:  # noqa: BLE001 - the session ends under the statement
            pass
    started = time.monotonic()
    assert writer.write_now() == 0  # no exception: the loop goes on
    assert time.monotonic() - started < 2 and errors == [1]
    assert job.pending_progress() is not None
    assert writer.write_now() == 1 and stored(job).done == 3
