"""PostgreSQL: enqueue()'s INSERT as a prepared statement (db/prepared.py), only where the
project allows prepared statements, only in autocommit, and never at the cost of a job."""

import contextlib

import pytest
from django.db import IntegrityError, ProgrammingError, connection, transaction
from django.test import override_settings

from django_dbjobs import enqueue
from django_dbjobs.db import libpq, prepared
from django_dbjobs.models import Job
from tests import jobs

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements through libpq"),
    pytest.mark.django_db(transaction=True),
]


@contextlib.contextmanager
def threshold(value):
    """psycopg's prepare_threshold on the test connection, as OPTIONS would set it."""
    connection.ensure_connection()
    raw = connection.connection
    before = raw.prepare_threshold
    raw.prepare_threshold = value
    try:
        yield raw
    finally:
        raw.prepare_threshold = before
        prepared._names.pop(raw, None)
        prepared._losses.pop(raw, None)
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE ALL")


def ours() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'dbjobs%%'")
        return [row[0] for row in cursor.fetchall()]


def executions(name: str) -> int:
    """How many times the server ran the prepared statement `name` (PostgreSQL 14+)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans + custom_plans FROM pg_prepared_statements WHERE name = %s", [name]
        )
        return cursor.fetchone()[0]


def test_djangos_default_prepares_nothing():
    with threshold(None):
        job = enqueue(jobs.add, 1, 2)
        enqueue(jobs.add, 3, 4)
        assert ours() == []
    assert Job.objects.get(pk=job.pk).args == [1, 2]


def test_with_prepared_statements_allowed_the_insert_is_prepared_once():
    with threshold(5):
        first = enqueue(jobs.add, 1, 2, queue="q")
        names = ours()
        assert len(names) == 1
        second = enqueue(jobs.add, 3, 4, queue="q")
        assert ours() == names
        if connection.pg_version >= 140000:
            assert executions(names[0]) == 2
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements WHERE name = %s", names)
            assert cursor.fetchone()[0].startswith('INSERT INTO "django_dbjobs_job"')
    rows = {job.pk: (job.args, job.queue, job.run_at, job.enqueued_at) for job in Job.objects.all()}
    assert rows == {
        first.pk: ([1, 2], "q", first.run_at, first.enqueued_at),
        second.pk: ([3, 4], "q", second.run_at, second.enqueued_at),
    }
    assert first.run_at is not None and first.enqueued_at <= second.enqueued_at


@pytest.mark.parametrize("where", ["atomic", "server-side cursors off"])
def test_not_prepared_inside_a_transaction_nor_behind_a_pooler(where):
    with threshold(5):
        if where == "atomic":
            with transaction.atomic():
                Job.objects.exists()  # the transaction has begun: enqueue() runs through libpq
                enqueue(jobs.add, 1, 2)
        else:
            before = connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
            connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = True
            try:
                enqueue(jobs.add, 1, 2)
            finally:
                connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = before
        assert ours() == []
    assert Job.objects.count() == 1


def deallocate_all():
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # or DISCARD ALL, or psycopg's own after a rollback


def test_a_statement_gone_from_the_session_is_sent_again_then_prepared_again():
    with threshold(5) as raw:
        enqueue(jobs.add, 1, 2)
        deallocate_all()
        job = enqueue(jobs.add, 3, 4)  # fails before it runs, then goes unprepared
        assert ours() == [] and prepared._names[raw] == {}
        enqueue(jobs.add, 5, 6)
        assert len(ours()) == 1
    assert Job.objects.get(pk=job.pk).args == [3, 4]
    assert sorted(job.args for job in Job.objects.all()) == [[1, 2], [3, 4], [5, 6]]


def test_a_connection_that_keeps_losing_them_prepares_no_more(caplog):
    with threshold(5) as raw:
        for n in range(prepared.MAX_LOSSES):
            enqueue(jobs.add, n, 0)  # prepared (again)
            deallocate_all()
            assert prepared._names[raw], "not given up yet"
            with caplog.at_level("INFO", logger="django_dbjobs"):
                enqueue(jobs.add, n, 1)  # lost, sent unprepared
        assert prepared._names[raw] is None and not prepared.allowed(connection, raw)
        assert "prepares no more statements" in caplog.text
        enqueue(jobs.add, 10, 10)
        assert ours() == []
    assert Job.objects.count() == 2 * prepared.MAX_LOSSES + 1


def test_losses_far_apart_are_forgiven():
    with threshold(5) as raw:
        enqueue(jobs.add, 0, 0)
        for n in range(prepared.MAX_LOSSES + 1):
            deallocate_all()
            enqueue(jobs.add, n, 1)  # lost, sent unprepared
            for _ in range(prepared.RECOVERY):
                enqueue(jobs.add, n, 2)  # prepared again, then run
        assert prepared._names[raw] and len(ours()) == 1
    assert Job.objects.count() == 1 + (prepared.MAX_LOSSES + 1) * (1 + prepared.RECOVERY)


def test_a_failed_prepare_leaves_the_plain_statement_to_raise_the_error():
    with threshold(5) as raw:
        statement = libpq.query("INSERT INTO no_such_table VALUES (%s)")[0]
        with pytest.raises(ProgrammingError, match="no_such_table"), connection.wrap_database_errors:
            libpq.run(connection, statement, ["x"], prepare=True)
        with raw.lock:  # what run() got from it: nothing ran, send it plain
            assert prepared.execute(raw, statement, [b"x"]) == (None, None)
        assert prepared.allowed(connection, raw), "an error in the statement is not a pooler's"
        enqueue(jobs.add, 1, 2)
        assert len(ours()) == 1
    assert Job.objects.count() == 1


def test_a_session_that_has_the_statement_already_uses_it():
    with threshold(5) as raw:
        enqueue(jobs.add, 1, 2)
        names = ours()
        prepared._names.pop(raw)  # as a new process would find a pooled session
        enqueue(jobs.add, 3, 4)
        assert ours() == names and prepared._names[raw]
    assert Job.objects.count() == 2


def test_the_databases_errors_come_back_as_djangos_and_the_connection_goes_on():
    with threshold(5) as raw:
        enqueue(jobs.add, 1, 2)
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE django_dbjobs_job ADD CONSTRAINT refused CHECK (queue <> 'refused')")
        try:
            with pytest.raises(IntegrityError):
                enqueue(jobs.add, 3, 4, queue="refused")
            enqueue(jobs.add, 5, 6, queue="accepted")
            assert len(ours()) == 1 and prepared._names[raw]
        finally:
            with connection.cursor() as cursor:
                cursor.execute("ALTER TABLE django_dbjobs_job DROP CONSTRAINT refused")
    assert sorted(Job.objects.values_list("queue", flat=True)) == ["accepted", "default"]


@override_settings(DEBUG=True)
def test_a_watched_connection_runs_it_through_djangos_cursor():
    with threshold(5):
        connection.queries_log.clear()
        job = enqueue(jobs.add, 1, 2)
        assert any(query["sql"].startswith('INSERT INTO "django_dbjobs_job"') for query in connection.queries)
        assert ours() == []
    assert Job.objects.get(pk=job.pk).args == [1, 2]
