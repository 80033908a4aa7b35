"""enqueue()'s one-row INSERT and the claim's statement (insert_one.py, db/direct.py, db/libpq.py):
the same row as save() stores, and every Django feature around a query kept."""

import datetime
import threading

import pytest
from django.db import DataError, OperationalError, connection, connections, transaction
from django.db.models.signals import post_save
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbjobs import enqueue, enqueue_many
from django_dbjobs.db import libpq
from django_dbjobs.enqueuing import insert_one
from django_dbjobs.exceptions import InvalidJob
from django_dbjobs.models import Job
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def writes_itself() -> bool:
    """Whether insert_one.insert() writes the row (not on MySQL: no INSERT ... RETURNING)."""
    return connection.features.can_return_columns_from_insert


COMPARED = [f.attname for f in Job._meta.concrete_fields if f.attname not in ("id", "run_at", "enqueued_at")]


def stored(job: Job) -> dict:
    return Job.objects.filter(pk=job.pk).values(*COMPARED).get()


def inserted_directly(calls: list) -> None:
    """Record each insert_one.insert() that ran the INSERT itself (True) or handed it back."""
    real = insert_one.insert

    def spy(*args):
        done = real(*args)
        calls.append(done)
        return done

    return spy


@pytest.fixture
def direct(monkeypatch):
    calls: list = []
    monkeypatch.setattr(insert_one, "insert", inserted_directly(calls))
    return calls


def saved(**kwargs):
    pass


@pytest.mark.parametrize(
    "args, options",
    [
        ((1, 2), {}),
        (("héllo ✓ 'quoted' %s %%", None, 3), {"kwargs": {"k": [1, {"x": "y"}]}}),
        ((), {"queue": "emails", "priority": -7, "max_attempts": 9, "delay": 30}),
        (("a",), {"run_at": datetime.datetime(2031, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc)}),
    ],
    ids=["plain", "odd-text-and-kwargs", "options", "run_at"],
)
def test_the_row_is_the_one_save_stores(direct, args, options):
    fast = enqueue(jobs.echo, *args, **options)
    post_save.connect(saved, sender=Job)  # a save signal's receiver: enqueue() then calls save()
    try:
        usual = enqueue(jobs.echo, *args, **options)
    finally:
        post_save.disconnect(saved, sender=Job)
    assert direct == [writes_itself(), False]
    assert stored(fast) == stored(usual)
    again = Job.objects.get(pk=fast.pk)
    assert (fast.run_at, fast.enqueued_at) == (again.run_at, again.enqueued_at)
    assert fast.args == again.args and fast.kwargs == again.kwargs
    assert not fast._state.adding and fast._state.db == "default"
    if "run_at" in options:
        assert again.run_at == options["run_at"]


def test_statements_are_made_once_per_set_of_given_fields(direct):
    insert_one._statements.clear()
    for n in range(3):
        enqueue(jobs.add, n, n)
    enqueue(jobs.send_email, "a@example.com", queue="reports", priority=-3)  # the same fields
    enqueue(jobs.echo, kwargs={"a": 1})  # its keyword arguments too
    assert direct == [writes_itself()] * 5
    assert len(insert_one._statements) == (2 if writes_itself() else 0)
    assert Job.objects.get(name="tests.jobs.send_email").queue == "reports"


def test_logged_queries_and_execute_wrappers_see_the_insert(direct):
    with CaptureQueriesContext(connection) as captured:
        enqueue(jobs.add, 1, 2)
    assert [q["sql"] for q in captured.captured_queries if q["sql"].startswith("INSERT")]
    seen = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        enqueue(jobs.add, 3, 4)
    assert any(sql.startswith("INSERT") for sql in seen)
    assert direct == [writes_itself()] * 2  # its statement all the same


def test_inside_atomic_the_job_commits_and_rolls_back_with_the_transaction(direct):
    with transaction.atomic():
        Job.objects.exists()  # the transaction has begun: the INSERT joins it
        kept = enqueue(jobs.add, 1, 1)
    with pytest.raises(RuntimeError), transaction.atomic():
        Job.objects.exists()
        lost = enqueue(jobs.add, 2, 2)
        raise RuntimeError
    with transaction.atomic():
        first = enqueue(jobs.add, 3, 3)  # the first statement of its transaction
    assert direct == [writes_itself()] * 3
    assert set(Job.objects.values_list("pk", flat=True)) == {kept.pk, first.pk}
    assert not Job.objects.filter(pk=lost.pk).exists()


def test_a_failed_insert_raises_djangos_error_and_marks_the_transaction_for_rollback():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite waits for its write lock instead (busy timeout)")
    locked, release = threading.Event(), threading.Event()

    def hold_lock():  # the thread's own connection
        table = connection.ops.quote_name(Job._meta.db_table)
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                if connection.vendor == "postgresql":
                    cursor.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
                else:
                    cursor.execute(f"LOCK TABLES {table} WRITE")
                locked.set()
                release.wait(10)
                if connection.vendor == "mysql":
                    cursor.execute("UNLOCK TABLES")
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold_lock)
    thread.start()
    try:
        assert locked.wait(10)
        with transaction.atomic():
            with connection.cursor() as cursor:
                if connection.vendor == "postgresql":
                    cursor.execute("SET LOCAL lock_timeout = '50ms'")
                else:
                    cursor.execute("SET SESSION lock_wait_timeout = 1")
            with pytest.raises(OperationalError):
                enqueue(jobs.add, 1, 2)
            assert connection.needs_rollback
    finally:
        release.set()
        thread.join(10)
        if connection.vendor == "mysql":
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION lock_wait_timeout = DEFAULT")
    assert Job.objects.count() == 0


@pytest.mark.skipif(connection.vendor != "postgresql", reason="libpq is PostgreSQL's")
def test_libpq_errors_become_djangos_and_the_connection_stays_usable():
    connection.ensure_connection()
    statement, count = libpq.query("SELECT %s::varchar(3), '%%'")
    assert (statement, count) == (b"SELECT $1::varchar(3), '%'", 1)
    with connection.wrap_database_errors:
        assert libpq.run(connection, statement, ["abc"]) == [("abc", "%")]
        assert libpq.run(connection, statement, ["ab"], many=True) == ([("ab", "%")], ("varchar", "?column?"))
        assert libpq.run(connection, libpq.query("SELECT %s + 1 WHERE false")[0], [41]) == []
    with pytest.raises(DataError), connection.wrap_database_errors:
        libpq.run(connection, b"INSERT INTO django_dbjobs_job (id) VALUES ($1) RETURNING id", ["x" * 40])
    assert Job.objects.count() == 0
    with connection.wrap_database_errors:  # a datetime goes through psycopg's adapters
        when = datetime.datetime(2030, 5, 6, 7, 8, 9, 10, tzinfo=datetime.timezone.utc)
        assert libpq.run(connection, b"SELECT $1::timestamptz, $2 + 1", [when, 41]) == [(when, 42)]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="libpq is PostgreSQL's")
def test_libpq_hands_back_what_psycopgs_cursor_must_do():
    connection.ensure_connection()
    select = libpq.query("SELECT 1")[0]
    with transaction.atomic():  # not yet begun: psycopg sends BEGIN first
        assert libpq.run(connection, select, []) is None
        Job.objects.exists()
        assert libpq.run(connection, select, []) == [(1,)]
    with connection.connection.pipeline():
        assert libpq.run(connection, select, []) is None


def test_options_are_validated_every_time_whatever_was_seen_before():
    enqueue(jobs.add, 1, 2, priority=1)
    with pytest.raises(InvalidJob):
        enqueue(jobs.add, 1, 2, priority=True)
    enqueue(jobs.add, 1, 2, queue="reports")
    with override_settings(DBJOBS_QUEUES=["default"]), pytest.raises(InvalidJob):
        enqueue(jobs.add, 1, 2, queue="reports")
    with override_settings(DBJOBS_DEFAULT_QUEUE="bulk"):
        assert enqueue(jobs.add, 1, 2).queue == "bulk"
    assert enqueue(jobs.add, 1, 2).queue == "default"
    assert timezone.is_aware(Job.objects.latest("enqueued_at").enqueued_at)


@override_settings(DEBUG=True)
def test_a_failed_insert_under_debug_still_marks_the_transaction_for_rollback(monkeypatch):
    from django_dbjobs.db import direct

    def refused(*args, **kwargs):
        raise DataError("refused")

    with transaction.atomic():
        Job.objects.exists()
        monkeypatch.setattr(connection, "create_cursor", refused)  # Django's cursor() makes one too
        with pytest.raises(DataError):
            direct.run(connection, "SELECT 1", [])
        monkeypatch.undo()
        assert connection.needs_rollback
        connection.set_rollback(False)


def test_a_backend_that_hooks_its_cursors_gets_every_statement_through_them(direct):
    wrapper = connections["default"]  # the wrapper itself, not django.db.connection's proxy
    calls = []
    original = wrapper._cursor

    def hooked(*args, **kwargs):  # what django-tenants' backend does to set the search path
        calls.append(1)
        return original(*args, **kwargs)

    wrapper.__dict__.pop("_dbjobs_stock", None)  # what direct.py worked out of the wrapper
    wrapper._cursor = hooked
    try:
        enqueue(jobs.add, 1, 2)
        Job.objects.claim("w1", 1)
    finally:
        del wrapper._cursor
        wrapper.__dict__.pop("_dbjobs_stock", None)
    assert len(calls) >= 2
    assert Job.objects.get().status == "RUNNING"


def test_a_queue_given_as_a_str_enum_member_is_stored_as_its_value():
    import enum

    class Queue(str, enum.Enum):
        REPORTS = "reports"

    class Priority(int, enum.Enum):
        HIGH = 7

    job = enqueue(jobs.add, 1, 2, queue=Queue.REPORTS, priority=Priority.HIGH)
    assert type(job.queue) is str and job.queue == "reports"
    assert type(job.priority) is int and job.priority == 7
    many = enqueue_many(jobs.add, [(1, 2), (3, 4)], queue=Queue.REPORTS, priority=Priority.HIGH)
    assert all(type(j.queue) is str for j in many)
    enqueue(jobs.add, 1, 2, queue="reports")
    assert set(Job.objects.values_list("queue", "priority")) == {("reports", 7), ("reports", 0)}
    assert Job.objects.count() == 4
    with pytest.raises(InvalidJob):
        enqueue(jobs.add, 1, 2, queue="reports\n")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="libpq is PostgreSQL's")
def test_libpq_keeps_nothing_that_outlives_its_connection():
    import gc
    import weakref

    other = connections.create_connection("default")
    other.ensure_connection()
    with other.wrap_database_errors:
        assert libpq.run(other, b"SELECT 1", []) == [(1,)]
    raw = weakref.ref(other.connection)
    other.close()
    del other
    gc.collect()
    assert raw() is None


def test_a_patched_cursor_wrapper_sees_every_statement(direct, monkeypatch):
    import functools

    from django.db.backends.utils import CursorWrapper

    seen = []
    real = CursorWrapper.execute

    @functools.wraps(real)  # as Sentry patches it: same name and module, other code
    def traced(self, sql, params=None):
        seen.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", traced)
    enqueue(jobs.add, 1, 2)
    Job.objects.claim("w1", 1)
    assert any(sql.startswith("INSERT") for sql in seen)
    assert any(sql.startswith("UPDATE") or "FOR UPDATE" in sql for sql in seen)
