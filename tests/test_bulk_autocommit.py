"""enqueue_many() called in autocommit: on PostgreSQL and MySQL/MariaDB its jobs go in by one
INSERT, a transaction of its own (bulk.py _one_statement()), prepared on PostgreSQL;
wherever that could not hold (more jobs than one statement takes, a job_enqueued
receiver, SQLite) they go in one transaction, as inside the caller's."""

import datetime

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from django_dbjobs import enqueue_many
from django_dbjobs.db import copy_rows, insert_rows
from django_dbjobs.enqueuing import wakeup
from django_dbjobs.models import Job
from django_dbjobs.signals import job_enqueued
from tests import jobs
from tests.test_prepared import ours, session  # noqa: F401 - session is a fixture

pytestmark = pytest.mark.django_db(transaction=True)

#: Enough jobs for COPY, which this path does not take.
MANY = copy_rows.FEWEST_ROWS + 36
ONE_STATEMENT = connection.vendor in ("postgresql", "mysql")


@pytest.fixture
def commits(monkeypatch):
    """The transactions committed on the test connection (atomic blocks: BEGIN ... COMMIT)."""
    done = []
    real = connection.commit
    monkeypatch.setattr(connection, "commit", lambda: done.append(1) or real())
    return done


@pytest.fixture
def statements():
    """The SQL of every statement run through Django's cursor (COPY is not one: see copy_rows).

    The connection is opened first: a fresh one's own set-up (MySQL's SET SESSION
    TRANSACTION ISOLATION LEVEL) is not the call's.
    """
    seen = []
    connection.ensure_connection()
    with connection.execute_wrapper(lambda execute, sql, *rest: seen.append(sql) or execute(sql, *rest)):
        yield seen


def test_a_call_in_autocommit_is_one_insert_outside_any_transaction(commits, statements, monkeypatch):
    monkeypatch.setattr(copy_rows, "copy", None)  # called: a TypeError
    before = wakeup.generation()
    created = enqueue_many(jobs.add, [(n, n) for n in range(MANY)], queue="bulk")
    ran = list(statements)
    assert wakeup.generation() == before + 1, "one wake for the whole call"
    rows = list(Job.objects.order_by("pk").values_list("pk", "args", "queue", "run_at", "enqueued_at"))
    assert [row[:3] for row in rows] == [(job.pk, [n, n], "bulk") for n, job in enumerate(created)]
    assert {(job.run_at, job.enqueued_at) for job in created} == {row[3:] for row in rows}
    assert all(not job._state.adding and job._state.db == "default" for job in created)
    inserts = [sql for sql in ran if "INSERT INTO" in sql]
    if ONE_STATEMENT:  # MySQL/MariaDB read the clock first (clock_once.py)
        assert commits == [] and len(inserts) == 1 and len(ran) == (2 if connection.vendor == "mysql" else 1)
    else:
        assert commits == [1], "one transaction"


def test_a_run_at_given_is_stored_and_the_database_clock_read_back(commits):
    later = timezone.now() + datetime.timedelta(hours=1)
    created = enqueue_many(jobs.add, [(n, n) for n in range(MANY)], run_at=later)
    stored = Job.objects.get(pk=created[-1].pk)
    assert (stored.run_at, stored.enqueued_at) == (later, created[-1].enqueued_at) != (later, None)
    assert commits == ([] if ONE_STATEMENT else [1])


def test_a_job_enqueued_receiver_that_raises_stores_none_of_the_call(commits):
    def refuse(sender, job, **kwargs):
        if job.args == [5, 5]:
            raise RuntimeError("refused")

    job_enqueued.connect(refuse)
    try:
        with pytest.raises(RuntimeError):
            enqueue_many(jobs.add, [(n, n) for n in range(MANY)])
    finally:
        job_enqueued.disconnect(refuse)
    assert Job.objects.count() == 0, "the receivers run inside the call's transaction"
    enqueue_many(jobs.add, [(n, n) for n in range(MANY)])
    assert Job.objects.count() == MANY


def test_more_jobs_than_one_statement_takes_go_in_one_transaction(commits, monkeypatch):
    enqueue_many(jobs.add, [(n, n) for n in range(25)], batch_size=10)
    assert commits == [1]
    monkeypatch.setattr(insert_rows, "MAX_ARRAY_TEXT", 40)  # a few jobs' arguments at most
    enqueue_many(jobs.echo, [(f"argument-{n:03}",) for n in range(25)])
    assert commits == ([1] if connection.vendor == "mysql" else [1, 1]), "MySQL: a VALUES list, no array"
    assert Job.objects.count() == 50


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements through libpq")
def test_the_insert_is_prepared(session):  # noqa: F811 - the fixture
    enqueue_many(jobs.add, [(n, n) for n in range(MANY)])
    enqueue_many(jobs.add, [(n, n) for n in range(3)])  # the same statement, whatever the count
    (name,) = ours()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE name = %s", [name])
        assert "INSERT INTO" in cursor.fetchone()[0]
    assert Job.objects.count() == MANY + 3


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements through libpq")
@override_settings(DBJOBS_PREPARED_STATEMENTS=False)
def test_turned_off_the_insert_is_not_prepared(session):  # noqa: F811 - the fixture
    enqueue_many(jobs.add, [(n, n) for n in range(MANY)])
    assert ours() == []
    assert Job.objects.count() == MANY
