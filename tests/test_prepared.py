"""PostgreSQL: enqueue()'s INSERT and the worker's claim as prepared statements
(db/prepared.py, ``DBJOBS_PREPARED_STATEMENTS``, on by default): only in autocommit, and
never at the cost of a job."""

import pytest
from django.db import DatabaseError, IntegrityError, ProgrammingError, connection, connections, transaction
from django.test import override_settings

from django_dbjobs import enqueue, enqueue_many
from django_dbjobs.db import direct, libpq, prepared
from django_dbjobs.models import Job
from tests import jobs

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements through libpq"),
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def session():
    """The test connection with no prepared statement and a clean record of them."""
    connection.ensure_connection()
    raw = connection.connection

    def forget():
        prepared._names.pop(raw, None)
        prepared._losses.pop(raw, None)
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE ALL")

    forget()
    yield raw
    forget()


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


@override_settings(DBJOBS_PREPARED_STATEMENTS=False)
def test_turned_off_nothing_is_prepared(session):
    job = enqueue(jobs.add, 1, 2)
    enqueue(jobs.add, 3, 4)
    assert ours() == []
    assert Job.objects.get(pk=job.pk).args == [1, 2]


@pytest.fixture
def pipelines(monkeypatch):
    """The pipelines libpq sends, each as the number of Syncs it holds: one round trip each."""
    sent = []
    real = libpq._pipelined

    def counted(raw, sends):
        sent.append(1 + sum(send is prepared.SYNC for send in sends))
        return real(raw, sends)

    monkeypatch.setattr(libpq, "_pipelined", counted)
    return sent


def test_the_first_insert_is_prepared_and_run_in_one_round_trip_then_run_prepared(session, pipelines):
    """A web request on a new connection (CONN_MAX_AGE = 0) pays no round trip for preparing."""
    if not libpq._pipelines():
        pytest.skip("libpq before 14 has no pipeline mode: preparing takes a round trip of its own")
    first = enqueue(jobs.add, 1, 2)
    assert pipelines == [2], "PREPARE, then EXECUTE after a Sync, in one pipeline"
    assert len(ours()) == 1
    second = enqueue(jobs.add, 3, 4)
    assert pipelines == [2], "then the prepared statement alone"
    assert sorted(Job.objects.values_list("args", flat=True)) == [[1, 2], [3, 4]]
    assert first.run_at is not None and second.enqueued_at >= first.enqueued_at


def test_a_first_insert_the_database_refuses_is_raised_once_and_stays_prepared(session, pipelines):
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_dbjobs_job ADD CONSTRAINT refused CHECK (queue <> 'refused')")
    try:
        with pytest.raises(IntegrityError, match="refused"):
            enqueue(jobs.add, 1, 2, queue="refused")
        assert len(pipelines) == 1, "not sent again"
        assert len(ours()) == 1 and prepared._names[session]
        enqueue(jobs.add, 3, 4, queue="accepted")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE django_dbjobs_job DROP CONSTRAINT refused")
    assert list(Job.objects.values_list("queue", flat=True)) == ["accepted"]


def test_by_default_the_insert_is_prepared_once(session):
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
def test_not_prepared_inside_a_transaction_nor_behind_a_pooler(session, where):
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


def test_a_statement_gone_from_the_session_is_sent_again_then_prepared_again(session):
    enqueue(jobs.add, 1, 2)
    deallocate_all()
    job = enqueue(jobs.add, 3, 4)  # fails before it runs, then goes unprepared
    assert ours() == [] and prepared._names[session] == {}
    enqueue(jobs.add, 5, 6)
    assert len(ours()) == 1
    assert Job.objects.get(pk=job.pk).args == [3, 4]
    assert sorted(job.args for job in Job.objects.all()) == [[1, 2], [3, 4], [5, 6]]


def test_a_connection_that_keeps_losing_them_prepares_no_more(session, caplog):
    for n in range(prepared.MAX_LOSSES):
        enqueue(jobs.add, n, 0)  # prepared (again)
        deallocate_all()
        assert prepared._names[session], "not given up yet"
        with caplog.at_level("INFO", logger="django_dbjobs"):
            enqueue(jobs.add, n, 1)  # lost, sent unprepared
    assert prepared._names[session] is None and not prepared.allowed(connection, session)
    assert "prepares no more statements" in caplog.text
    enqueue(jobs.add, 10, 10)
    assert ours() == []
    assert Job.objects.count() == 2 * prepared.MAX_LOSSES + 1


def test_losses_far_apart_are_forgiven(session):
    enqueue(jobs.add, 0, 0)
    for n in range(prepared.MAX_LOSSES + 1):
        deallocate_all()
        enqueue(jobs.add, n, 1)  # lost, sent unprepared
        for _ in range(prepared.RECOVERY):
            enqueue(jobs.add, n, 2)  # prepared again, then run
    assert prepared._names[session] and len(ours()) == 1
    assert Job.objects.count() == 1 + (prepared.MAX_LOSSES + 1) * (1 + prepared.RECOVERY)


def test_a_failed_prepare_leaves_the_plain_statement_to_raise_the_error(session):
    statement = libpq.query("INSERT INTO no_such_table VALUES (%s)")[0]
    with pytest.raises(ProgrammingError, match="no_such_table"), connection.wrap_database_errors:
        libpq.run(connection, statement, ["x"], prepare=True)
    with session.lock:  # what run() got from it: nothing ran, send it plain
        assert prepared.execute(session, statement, [b"x"]) == (None, None)
    assert prepared.allowed(connection, session), "an error in the statement is not a pooler's"
    enqueue(jobs.add, 1, 2)
    assert len(ours()) == 1
    assert Job.objects.count() == 1


def test_a_session_that_has_the_statement_already_uses_it(session, pipelines):
    enqueue(jobs.add, 1, 2)
    names = ours()
    prepared._names.pop(session)  # as a new client connection finds a pooled server session
    del pipelines[:]
    enqueue(jobs.add, 3, 4)  # PREPARE fails (42P05); the run after its Sync goes ahead
    if libpq._pipelines():
        assert pipelines == [2], "one round trip"
    assert ours() == names and prepared._names[session]
    assert Job.objects.count() == 2


def test_the_databases_errors_come_back_as_djangos_and_the_connection_goes_on(session):
    enqueue(jobs.add, 1, 2)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_dbjobs_job ADD CONSTRAINT refused CHECK (queue <> 'refused')")
    try:
        with pytest.raises(IntegrityError):
            enqueue(jobs.add, 3, 4, queue="refused")
        enqueue(jobs.add, 5, 6, queue="accepted")
        assert len(ours()) == 1 and prepared._names[session]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE django_dbjobs_job DROP CONSTRAINT refused")
    assert sorted(Job.objects.values_list("queue", flat=True)) == ["accepted", "default"]


@override_settings(DEBUG=True)
def test_a_watched_connection_runs_it_through_djangos_cursor(session):
    connection.queries_log.clear()
    job = enqueue(jobs.add, 1, 2)
    assert any(query["sql"].startswith('INSERT INTO "django_dbjobs_job"') for query in connection.queries)
    assert ours() == []
    assert Job.objects.get(pk=job.pk).args == [1, 2]


# The worker's claim.


def claim_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE name LIKE 'dbjobs%%'"
            " AND statement LIKE 'UPDATE \"django_dbjobs_job\" SET status = ''RUNNING''%%'"
        )
        return [row[0] for row in cursor.fetchall()]


def claim(count: int = 1) -> list[Job]:
    return Job.objects.claim("w1", count)


def test_the_claim_is_prepared_once_per_connection_by_default(session):
    first, second = enqueue(jobs.add, 1, 2), enqueue(jobs.add, 3, 4, priority=5)
    assert [job.pk for job in claim()] == [second.pk]
    (name,) = claim_statements()
    assert [job.pk for job in claim()] == [first.pk]
    assert claim() == []
    assert claim_statements() == [name]
    if connection.pg_version >= 140000:
        assert executions(name) == 3
    rows = Job.objects.values_list("pk", "status", "worker", "attempts")
    assert sorted(rows) == sorted([(first.pk, "RUNNING", "w1", 1), (second.pk, "RUNNING", "w1", 1)])


@pytest.mark.parametrize("where", ["setting", "pooler", "transaction"])
def test_the_claim_is_not_prepared_when_turned_off_behind_a_pooler_or_in_a_transaction(session, where):
    job = enqueue(jobs.add, 1, 2)
    if where == "setting":
        with override_settings(DBJOBS_PREPARED_STATEMENTS=False):
            claimed = claim()
    elif where == "pooler":
        connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = True
        try:
            claimed = claim()
        finally:
            del connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"]
    else:
        with transaction.atomic():
            claimed = claim()
    assert [j.pk for j in claimed] == [job.pk]
    assert claim_statements() == []


def test_a_claim_gone_from_the_session_is_sent_plain_then_prepared_again(session):
    jobs_in_order = [enqueue(jobs.add, n, n) for n in range(3)]
    assert [j.pk for j in claim()] == [jobs_in_order[0].pk]
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # what a pooler's DISCARD ALL does
    assert [j.pk for j in claim()] == [jobs_in_order[1].pk]  # plain, once
    assert claim_statements() == []
    assert [j.pk for j in claim()] == [jobs_in_order[2].pk]
    assert len(claim_statements()) == 1
    assert Job.objects.filter(status="RUNNING", attempts=1).count() == 3


def test_a_session_that_has_the_claim_already_uses_it(session):
    first, second = enqueue(jobs.add, 1, 2), enqueue(jobs.add, 3, 4)
    assert [j.pk for j in claim()] == [first.pk]
    (name,) = claim_statements()
    prepared._names.pop(session)  # a new Django connection on a pooled server session
    assert [j.pk for j in claim()] == [second.pk]
    assert claim_statements() == [name]
    if connection.pg_version >= 140000:
        assert executions(name) == 2


def test_a_prepared_claim_keeps_a_plan_made_without_sorting(session):
    """Every plan of the prepared claim is made in its pipeline, after enable_sort is turned
    off: the generic plan PostgreSQL caches after five runs too, which later runs reuse
    whatever the session's settings then."""
    from tests.test_claim_without_sort import PREFER_SORTING

    enqueue_many(jobs.add, [(n, n) for n in range(300)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_dbjobs_job")
        cursor.execute(PREFER_SORTING)
    try:
        taken = [job.pk for _ in range(8) for job in claim(5)]
        in_claim_order = Job.objects.order_by("-priority", "run_at", "pk").values_list("pk", flat=True)
        assert taken == list(in_claim_order[:40])
        (name,) = claim_statements()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            cursor.execute("SELECT statement FROM pg_prepared_statements WHERE name = %s", [name])
            (statement,) = cursor.fetchone()
            cursor.execute(f"PREPARE dbjobs_test_fresh AS {statement}")
            cursor.execute("EXPLAIN EXECUTE dbjobs_test_fresh('w1', 'w1', 5)")
            fresh = "\n".join(row[0] for row in cursor.fetchall())
            cursor.execute(f"EXPLAIN EXECUTE {name}('w1', 'w1', 5)")
            cached = "\n".join(row[0] for row in cursor.fetchall())
            cursor.execute("DEALLOCATE dbjobs_test_fresh")
        assert "Sort" in fresh, f"planned now, with sorting allowed, it sorts (the premise): {fresh}"
        assert "Sort" not in cached and "dbjobs_job_claimable_idx" in cached, cached
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET random_page_cost")


def test_an_error_in_a_prepared_claim_is_raised_and_the_connection_goes_on(session):
    wrapper = connections["default"]
    with pytest.raises(DatabaseError, match="division by zero"):
        direct.run(wrapper, "SELECT 1 / %s", [0], without_sort=True, prepare=True)
    assert connection.get_autocommit()
    assert direct.run(wrapper, "SELECT 2 / %s", [1], without_sort=True, prepare=True) == (2,)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement = 'SELECT 2 / $1'")
        assert cursor.fetchone()[0] == 1


def test_a_claim_whose_table_changed_is_sent_plain_and_prepared_no_more(session, caplog):
    """A migration that changes a returned column's type: the prepared claim no longer fits
    ("cached plan must not change result type"); the claim is sent plain and takes its job."""
    length = Job._meta.get_field("queue").max_length
    first, second = enqueue(jobs.add, 1, 2), enqueue(jobs.add, 3, 4)
    assert [j.pk for j in claim()] == [first.pk]
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE django_dbjobs_job ALTER COLUMN queue TYPE varchar({length + 1})")
    try:
        with caplog.at_level("INFO", logger="django_dbjobs"):
            assert [j.pk for j in claim()] == [second.pk]
        assert "prepares no more statements" in caplog.text
        assert prepared._names[session] is None
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE django_dbjobs_job ALTER COLUMN queue TYPE varchar({length})")


def test_a_filtered_querysets_claim_is_not_prepared(session):
    job = enqueue(jobs.add, 1, 2)
    assert [j.pk for j in Job.objects.filter(args=[1, 2]).claim("w1", 1)] == [job.pk]
    assert claim_statements() == []
