"""Many rows at once: on PostgreSQL they go in by COPY (db/copy_rows.py), elsewhere by the
multi-row INSERT; either way a row is exactly what save() writes, and prepare()'s jobs changed
after it are stored as changed."""

import datetime

import pytest
from django.db import DataError, connection, transaction
from django.utils import timezone

from django_dbjobs import bulk_enqueue, db, enqueue_many, prepare
from django_dbjobs.db import copy_rows
from django_dbjobs.enqueuing import inserts
from django_dbjobs.models import Job, JobStatus
from tests import jobs
from tests.test_bulk import stored
from tests.test_wakeup import Listening

MANY = copy_rows.FEWEST_ROWS + 36  # enough for COPY on PostgreSQL

# Text COPY's own format gives a meaning to: tabs, newlines, backslashes, \N (NULL) and \. (end).
AWKWARD = ["tab\tin", "line\nbreak\r\n", "back\\slash", "\\N", "\\.", "é \u2603 😀", "", 'q " , {x}']


@pytest.fixture
def copies(monkeypatch):
    """The rows of each COPY statement that ran (the real ones: this only counts them, as
    their chunks pass; copies.chunks has the size of every chunk)."""
    calls = CountedCopies()
    real = copy_rows.copy

    def counting(connection, shape, chunks, *args, **kwargs):
        rows = [0]

        def counted():
            for chunk in chunks:
                rows[0] += len(chunk)
                calls.chunks.append(len(chunk))
                yield chunk

        real(connection, shape, counted(), *args, **kwargs)
        calls.append(rows[0])

    monkeypatch.setattr(copy_rows, "copy", counting)
    return calls


class CountedCopies(list):
    def __init__(self):
        super().__init__()
        self.chunks = []


def expect_copy() -> bool:
    return copy_rows.usable(connection, MANY)


@pytest.mark.django_db
def test_many_rows_hold_awkward_text_and_json_exactly_as_save_writes_them(copies):
    def make(n):
        text = AWKWARD[n % len(AWKWARD)]
        job = prepare(jobs.echo, text, {"k": [text, None, 1.5]}, kwargs={"b": text}, queue=f"q-{n % 3}")
        job.last_error = text
        job.return_value = None if n % 2 else {"kept": [text, None]}
        return job

    count = 2 * MANY  # shapes of row: return_value None or not, last_error empty or not
    made = [make(n) for n in range(count)]
    references = [make(n) for n in range(count)]
    bulk_enqueue(made)
    assert bool(copies) == expect_copy(), "COPY on PostgreSQL, the INSERT elsewhere"
    assert all(size >= copy_rows.FEWEST_ROWS for size in copies)
    for reference in references:
        reference.save(force_insert=True)
    for job, reference in zip(made, references, strict=True):
        assert stored(job) == stored(reference)
    assert Job.objects.filter(return_value__isnull=True).count() == count  # None is SQL NULL, as save()


@pytest.mark.django_db
def test_enqueue_many_by_copy_gives_back_the_rows_clock_and_ids_in_order(copies):
    before = timezone.now()
    created = enqueue_many(jobs.add, [(i, i) for i in range(MANY)], queue="bulk", priority=3)
    assert copies == ([MANY] if expect_copy() else [])
    rows = list(Job.objects.order_by("id").values_list("id", "args", "run_at", "enqueued_at", "status"))
    assert [row[0] for row in rows] == [job.pk for job in created]
    assert [row[1] for row in rows] == [[i, i] for i in range(MANY)]
    assert {row[4] for row in rows} == {JobStatus.READY}
    if connection.features.can_return_rows_from_bulk_insert:
        assert {(job.run_at, job.enqueued_at) for job in created} == {row[2:4] for row in rows}
        assert rows[0][2] >= before - datetime.timedelta(seconds=5)


@pytest.mark.django_db
def test_enqueue_many_builds_its_jobs_a_chunk_at_a_time_as_copy_sends_them(copies, monkeypatch):
    built_during_copy = []
    real_build = inserts.build_many

    def build(*args):
        if connection.vendor == "postgresql":
            from psycopg import pq

            built_during_copy.append(
                connection.connection.pgconn.transaction_status == pq.TransactionStatus.ACTIVE
            )
        return real_build(*args)

    monkeypatch.setattr(inserts, "build_many", build)
    count = 2 * inserts.BUILT_AT_ONCE + 7
    created = enqueue_many(jobs.add, [(i, -i) for i in range(count)])
    if expect_copy():
        assert copies == [count]
        assert copies.chunks == [inserts.BUILT_AT_ONCE, inserts.BUILT_AT_ONCE, 7]
        assert built_during_copy == [True, True, True], "each chunk built with the COPY under way"
    assert len({job.pk for job in created}) == count
    assert [job.pk for job in created] == sorted(job.pk for job in created), "ids in order, across chunks"
    stored_rows = dict(Job.objects.values_list("id", "args"))
    assert [stored_rows[job.pk] for job in created] == [[i, -i] for i in range(count)]
    assert [job.args for job in created] == [[i, -i] for i in range(count)]
    assert all(not job._state.adding and job._state.db == "default" for job in created)
    if connection.features.can_return_rows_from_bulk_insert:
        assert len({(job.run_at, job.enqueued_at) for job in created}) == 1, "one read of the clock"
        assert isinstance(created[0].run_at, datetime.datetime)


@pytest.mark.django_db
def test_an_error_while_a_later_chunk_is_built_stores_none_of_the_call_and_nothing_else_is_lost(monkeypatch):
    """The COPY is under way when the second chunk's build fails: the call stores nothing,
    the caller's own write before it stays, and the connection works on."""
    if not expect_copy():
        pytest.skip("the jobs are built during a COPY on PostgreSQL only")
    real_build, calls = inserts.build_many, []

    def build(*args):
        calls.append(1)
        if len(calls) == 2:
            raise MemoryError("while the COPY runs")
        return real_build(*args)

    monkeypatch.setattr(inserts, "build_many", build)
    with transaction.atomic():
        kept = enqueue_many(jobs.add, [(0, 0)] * MANY)  # before: by COPY too, in one chunk
        calls.clear()
        with pytest.raises(MemoryError, match="while the COPY runs"):
            enqueue_many(jobs.add, [(i, i) for i in range(inserts.BUILT_AT_ONCE + 1)])
    assert len(calls) == 2, "the first chunk was built and written"
    assert set(Job.objects.values_list("id", flat=True)) == {job.pk for job in kept}
    monkeypatch.setattr(inserts, "build_many", real_build)
    assert len(enqueue_many(jobs.add, [(1, 1)] * MANY)) == MANY  # the connection works on
    assert Job.objects.count() == 2 * MANY


@pytest.mark.django_db
def test_init_signal_receivers_run_before_the_copy_and_may_query(copies):
    """User code never runs while COPY holds the connection: with Job init receivers the
    jobs are all built first (a query there would otherwise wait for the COPY forever)."""
    from django.db.models.signals import post_init

    seen = []

    def receiver(sender, instance, **kwargs):
        if instance._state.adding and instance.pk and not seen:
            seen.append(Job.objects.count())  # a query on the same connection

    post_init.connect(receiver, sender=Job)
    try:
        created = enqueue_many(jobs.add, [(i, i) for i in range(inserts.BUILT_AT_ONCE + 1)])
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert seen == [0]
    assert Job.objects.count() == len(created)
    if expect_copy():
        assert copies.chunks == [len(created)], "built first, in one go"


@pytest.mark.django_db
def test_prepared_jobs_changed_after_prepare_are_stored_as_changed(copies):
    later = timezone.now() + datetime.timedelta(hours=2)
    made = [prepare(jobs.add, n, n) for n in range(MANY)]
    made[1].priority = 8  # a given field replaced
    made[2].errors.append({"by": "hand"})  # a default list changed in place
    made[3].worker_ids.append("w-1")
    made[4].status = JobStatus.FAILED
    made[5].run_at = later  # the database's clock would have filled it in
    made[6].args.append(99)  # a given value changed in place
    bulk_enqueue(made)
    columns = ("args", "priority", "errors", "worker_ids", "status", "run_at")
    rows = {row["args"][0]: row for row in Job.objects.values(*columns)}
    assert rows[1]["priority"] == 8 and rows[0]["priority"] == 0
    assert rows[2]["errors"] == [{"by": "hand"}] and rows[0]["errors"] == []
    assert rows[3]["worker_ids"] == ["w-1"] and rows[0]["worker_ids"] == []
    assert rows[4]["status"] == JobStatus.FAILED and rows[0]["status"] == JobStatus.READY
    assert rows[5]["run_at"] == later and rows[0]["run_at"] < later
    assert rows[6]["args"] == [6, 6, 99]
    assert made[0].run_at == rows[0]["run_at"], "the returned jobs carry the clock the rows got"


@pytest.mark.django_db
def test_a_value_the_database_refuses_fails_the_call_and_stores_none_of_it():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite stores a queue name of any length")
    made = [prepare(jobs.add, n, n) for n in range(MANY)]
    made[MANY - 1].queue = "x" * 500  # past the column's length, set after validation
    with pytest.raises(DataError), transaction.atomic():
        bulk_enqueue(made)
    assert Job.objects.count() == 0
    bulk_enqueue([prepare(jobs.add, 1, 1) for _ in range(MANY)])  # the connection works on
    assert Job.objects.count() == MANY


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not db.supports_listen(), reason="NOTIFY exists on PostgreSQL only")
def test_copy_notifies_once_on_commit_and_never_on_rollback(copies):
    listener = Listening()
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            enqueue_many(jobs.add, [(n, n) for n in range(MANY)])
            raise RuntimeError("roll back")
        assert listener.received(0.3) == 0, "a rolled-back COPY notified"
        assert Job.objects.count() == 0
        with transaction.atomic():
            bulk_enqueue([prepare(jobs.add, n, n) for n in range(MANY)])
            assert listener.received(0.3) == 0, "notified before the commit"
        assert listener.received(1.0) == 1
        assert copies == [MANY, MANY]
    finally:
        listener.close()
