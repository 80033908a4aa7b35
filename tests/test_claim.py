import datetime
import threading

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings
from django.utils import timezone

from django_dbjobs import db, enqueue, enqueue_many
from django_dbjobs.models import Job, JobStatus
from tests import jobs
from tests.claim_plans import assert_on_the_claim_index


def claim(worker="w1", limit=10, queues=None):
    with transaction.atomic():
        return Job.objects.claim(worker, limit, queues)


@pytest.mark.django_db
def test_claim_takes_higher_priority_first_then_earlier_run_at_then_age():
    now = timezone.now()
    low = enqueue(jobs.add, 1, 1, priority=-5)
    late = enqueue(jobs.add, 2, 2, run_at=now - datetime.timedelta(seconds=10))
    early = enqueue(jobs.add, 3, 3, run_at=now - datetime.timedelta(seconds=20))
    urgent = enqueue(jobs.add, 4, 4, priority=50)
    same_time_a = enqueue(jobs.add, 5, 5, run_at=now - datetime.timedelta(seconds=30), priority=-1)
    same_time_b = enqueue(jobs.add, 6, 6, run_at=now - datetime.timedelta(seconds=30), priority=-1)
    claimed = [j.pk for j in claim(limit=10)]
    assert claimed == [urgent.pk, early.pk, late.pk, same_time_a.pk, same_time_b.pk, low.pk]


@pytest.mark.django_db
def test_claim_skips_jobs_whose_run_at_has_not_come():
    enqueue(jobs.add, 1, 1, delay=60)
    due = enqueue(jobs.add, 2, 2)
    assert [j.pk for j in claim()] == [due.pk]


@pytest.mark.django_db
def test_claim_takes_only_the_given_queues():
    enqueue(jobs.add, 1, 1, queue="a")
    b = enqueue(jobs.add, 2, 2, queue="b")
    c = enqueue(jobs.add, 3, 3, queue="c")
    assert {j.pk for j in claim(queues=["b", "c"])} == {b.pk, c.pk}
    assert [j.queue for j in claim(queues=None)] == ["a"]


@pytest.mark.django_db
def test_claim_marks_running_counts_the_attempt_and_respects_limit():
    for i in range(5):
        enqueue(jobs.add, i, i)
    claimed = claim(worker="me", limit=3)
    assert len(claimed) == 3
    rows = Job.objects.filter(pk__in=[j.pk for j in claimed])
    assert {(r.status, r.worker, r.attempts) for r in rows} == {(JobStatus.RUNNING, "me", 1)}
    assert all(r.started_at and r.last_attempted_at for r in rows)
    assert Job.objects.ready().count() == 2


@pytest.mark.skipif(not db.can_skip_locked(), reason="SQLite has no row locks")
@pytest.mark.django_db(transaction=True)
def test_a_claim_in_progress_hides_its_rows_from_a_second_connection():
    # Rows written and deleted first leave MariaDB's statistics stale: planned by them,
    # the pick read the whole table and sorted, and SKIP LOCKED then returned no row at
    # all while the first transaction held its two. The claim is pinned to its index.
    later = timezone.now() + datetime.timedelta(hours=1)
    enqueue_many(jobs.add, [(i, i) for i in range(2500)], run_at=later)
    Job.objects.all()._raw_delete(Job.objects.db)
    for i in range(4):
        enqueue(jobs.add, i, i)
    first_claimed = threading.Event()
    release = threading.Event()
    seen = {}

    def first_worker():
        try:
            with transaction.atomic():
                seen["first"] = [j.pk for j in Job.objects.claim("first", 2)]
                first_claimed.set()
                release.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=first_worker)
    thread.start()
    assert first_claimed.wait(10)
    try:
        seen["second"] = [j.pk for j in claim(worker="second", limit=4)]
    finally:
        release.set()
        thread.join()
    assert len(seen["first"]) == 2 and len(seen["second"]) == 2
    assert not set(seen["first"]) & set(seen["second"])


@pytest.mark.skipif(not db.can_skip_locked(), reason="SQLite serialises claims with the database write lock")
@pytest.mark.django_db
def test_claim_query_locks_with_skip_locked():
    from django.test.utils import CaptureQueriesContext

    enqueue(jobs.add, 1, 1)
    with CaptureQueriesContext(connection) as queries:
        claim()
    assert any("SKIP LOCKED" in q["sql"].upper() for q in queries.captured_queries)


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def claim_statements(limit=1) -> tuple[list, list]:
    """Claim in autocommit; return the jobs and the statements run."""
    statements = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        return Job.objects.claim("w1", limit), statements


@pytest.mark.skipif(connection.vendor != "postgresql", reason="synchronous_commit is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_postgresql_claims_wait_for_the_flush_by_default():
    enqueue(jobs.add, 1, 1)
    claimed, statements = claim_statements()
    assert len(claimed) == 1
    assert statements and not any("synchronous_commit" in sql for sql, _params in statements)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="synchronous_commit is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
@override_settings(DBJOBS_ASYNC_CLAIM_COMMIT=True)
def test_postgresql_async_claim_commit_turns_the_flush_off_for_the_claim_alone():
    first, second = enqueue(jobs.add, 1, 1), enqueue(jobs.add, 2, 2)
    server_default = synchronous_commit()
    assert connection.get_autocommit()
    claimed, statements = claim_statements()
    assert [j.pk for j in claimed] == [first.pk]
    assert synchronous_commit() == server_default  # set for the claim's own transaction only
    ((sql, params),) = [statement for statement in statements if "UPDATE" in statement[0]]
    sql = sql[sql.index("UPDATE") :]  # after the planner setting sent with it (claims.py)
    assert "set_config('synchronous_commit', 'off', true)" in sql
    # That statement's transaction commits asynchronously; the setting ends with it.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = on")
            cursor.execute(sql, params)
            assert [row[0] for row in cursor.fetchall()] == [second.pk]
        assert synchronous_commit() == "off"
    assert synchronous_commit() == server_default
    assert Job.objects.get(pk=second.pk).status == JobStatus.RUNNING


@pytest.mark.skipif(connection.vendor != "postgresql", reason="synchronous_commit is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
@override_settings(DBJOBS_ASYNC_CLAIM_COMMIT=True)
def test_postgresql_async_claim_commit_leaves_a_callers_transaction_durable():
    enqueue(jobs.add, 1, 1)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = on")
        claimed, statements = claim_statements()
        assert len(claimed) == 1
        assert synchronous_commit() == "on"
    assert statements and not any("synchronous_commit" in sql for sql, _params in statements)


@pytest.mark.django_db(transaction=True)
def test_claimed_jobs_are_what_the_orm_reads_and_init_receivers_still_hear_them(monkeypatch):
    from django.db.models.signals import post_init

    enqueue(jobs.echo, "é", 1, None, kwargs={"k": [1, 2]}, priority=3)
    enqueue(jobs.add, 1, 2)
    made = []
    init = Job.__init__

    def counted(self, *args, **kwargs):
        made.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(Job, "__init__", counted)
    (job,) = Job.objects.claim("w1", 1)
    monkeypatch.undo()
    assert made == []  # built without Model.__init__: nothing listens to its signals
    again = Job.objects.get(pk=job.pk)
    # MySQL stamps these by the database clock in its UPDATE after the read; the copies in
    # memory get the host's (db/claims.py).
    stamped = {"started_at", "last_attempted_at"} if connection.vendor == "mysql" else set()
    for field in Job._meta.concrete_fields:
        if field.attname not in stamped:
            assert getattr(job, field.attname) == getattr(again, field.attname), field.name
    assert job._state.adding is False and job._state.db == "default"
    heard = []

    def receiver(sender, instance, **kwargs):
        heard.append(instance.pk)

    post_init.connect(receiver, sender=Job)
    try:
        (second,) = Job.objects.claim("w1", 1)
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert heard == [second.pk]


@pytest.mark.skipif(
    connection.vendor == "postgresql", reason="PostgreSQL has no index hints (see test_claim_without_sort)"
)
@pytest.mark.parametrize(
    "shape",
    [
        {},
        {"queues": ["a", "b"]},
        {"paused": frozenset({"x"})},
        {"include_waiting": False},
        {"queues": ["a"], "include_waiting": False},
    ],
    ids=["any", "queues", "paused", "none-waiting", "queue-none-waiting"],
)
@pytest.mark.django_db(transaction=True)
def test_every_claim_shape_reads_the_claim_index_in_order_whatever_the_statistics(shape):
    # A few rows, then many written and deleted: no statistics, or stale ones.
    later = timezone.now() + datetime.timedelta(hours=1)
    enqueue_many(jobs.add, [(i, i) for i in range(2500)], run_at=later)
    Job.objects.all()._raw_delete(Job.objects.db)
    for i in range(4):
        enqueue(jobs.add, i, i, queue="a")
    sql, params = Job.objects.claim_sql("w", 10, **shape)
    with connection.cursor() as cursor:
        assert_on_the_claim_index(cursor, sql, params)


@pytest.mark.django_db
def test_a_filtered_queryset_narrows_its_claim_and_not_the_next_ones():
    """The claim SQL is compiled once per shape and cached: a filtered QuerySet's own
    filters must not be served to another claim, nor another's to it."""
    first = enqueue(jobs.add, 1, 1)
    wanted = enqueue(jobs.echo, 2, 3)
    other = enqueue(jobs.add, 4, 4)
    with transaction.atomic():
        assert [j.pk for j in Job.objects.filter(name=wanted.name).claim("w", 10)] == [wanted.pk]
    with transaction.atomic():
        assert [j.pk for j in Job.objects.filter(name=first.name).claim("w", 1)] == [first.pk]
    with transaction.atomic():
        assert [j.pk for j in Job.objects.filter(pk=wanted.pk).claim("w", 10)] == []
    later = enqueue(jobs.echo, 5, 5)
    with transaction.atomic():
        assert [j.pk for j in Job.objects.claim("w", 10)] == [other.pk, later.pk]
    pick, _params = Job.objects.filter(name=wanted.name).claim_sql("w", 10)
    assert "name" in pick


@pytest.mark.django_db
def test_filters_that_differ_only_deep_in_a_value_claim_their_own_jobs():
    """Values a repr() would cut short must still tell two filtered claims apart."""
    long_a, long_b = [1] * 29 + [1], [1] * 29 + [2]
    a = enqueue(jobs.echo, *long_a)
    b = enqueue(jobs.echo, *long_b)
    with transaction.atomic():
        assert [j.pk for j in Job.objects.filter(args=long_a).claim("w", 10)] == [a.pk]
    with transaction.atomic():
        assert [j.pk for j in Job.objects.filter(args=long_b).claim("w", 10)] == [b.pk]


@pytest.mark.django_db
def test_a_filter_value_that_looks_like_the_limit_placeholder_stays_the_callers():
    from django_dbjobs.db.claims import _LIMIT_MARK

    enqueue(jobs.add, 1, 1)
    pick, params = Job.objects.filter(attempts=_LIMIT_MARK).claim_sql("w", 3)
    assert _LIMIT_MARK in params and 3 in params
    with transaction.atomic():
        assert Job.objects.filter(attempts=_LIMIT_MARK).claim("w", 3) == []


@pytest.mark.django_db
def test_an_empty_queryset_claims_nothing_and_a_sliced_one_is_refused():
    job = enqueue(jobs.add, 1, 1)
    with transaction.atomic():
        assert Job.objects.none().claim("w", 10) == []
        assert Job.objects.filter(pk__in=[]).claim("w", 10) == []
    with pytest.raises(ValueError, match="without a slice"), transaction.atomic():
        Job.objects.all()[:5].claim("w", 1)
    with pytest.raises(ValueError, match="selects no rows"):
        Job.objects.none().claim_sql("w", 1)
    assert Job.objects.get(pk=job.pk).status == JobStatus.READY


@pytest.mark.django_db
def test_a_filtered_claim_inside_a_transaction_adds_no_savepoint_round_trips():
    """A filtered claim is compiled on every call; inside the caller's transaction that must
    not wrap the compile in a savepoint (two round trips each)."""
    from django.test.utils import CaptureQueriesContext

    def savepoints(claim) -> list[str]:
        with transaction.atomic(), CaptureQueriesContext(connection) as queries:
            assert len(claim()) == 1
        return [q["sql"].split()[0] for q in queries if "SAVEPOINT" in q["sql"].upper()]

    enqueue(jobs.add, 1, 1)
    enqueue(jobs.add, 2, 2)
    Job.objects.claim("warm", 0)  # the plain claim's SQL compiled and cached
    plain = savepoints(lambda: Job.objects.claim("w", 1))  # MySQL: the claim's own (pick, then mark)
    filtered = savepoints(lambda: Job.objects.filter(name=jobs.add.name).claim("w", 1))
    assert filtered == plain


class _ReadsElsewhere:
    def db_for_read(self, model, **hints):
        return "no_such_alias"


@pytest.mark.django_db
@override_settings(DATABASE_ROUTERS=[f"{__name__}._ReadsElsewhere"])
def test_a_claim_goes_to_the_router_write_alias_not_the_read_one():
    job = enqueue(jobs.add, 1, 1)
    with transaction.atomic():
        assert [j.pk for j in Job.objects.all().claim("w", 1)] == [job.pk]


@pytest.mark.django_db
@override_settings(DATABASE_ROUTERS=[f"{__name__}._ReadsElsewhere"])
def test_cancel_deletes_on_the_router_write_alias():
    enqueue(jobs.add, 1, 1)
    assert Job.objects.filter(name=jobs.add.name).cancel() == 1
    assert Job.objects.using("default").count() == 0


@pytest.mark.parametrize(
    "value", [None, "[]", "{}", "null", '"text"', "[1, 2]", '{"a": [1]}', "not json", "[", "", " []"]
)
def test_a_claim_s_json_columns_read_as_the_json_field_reads_them(value):
    """Claims build jobs from their rows with a fast path for the JSON values jobs nearly always
    have (db/rows_read.py): it must give what Django's JSONField.from_db_value() gives, for
    those values and every other (malformed text comes back as it was, as Django returns it)."""
    from django_dbjobs.db.rows_read import _faster

    field = Job._meta.get_field("args")
    fast = _faster(field.from_db_value, field)
    assert fast is not field.from_db_value, "the fast path is the one under test"
    expected = field.from_db_value(value, field.cached_col, connection)
    assert fast(value, field.cached_col, connection) == expected
    assert type(fast(value, field.cached_col, connection)) is type(expected)
