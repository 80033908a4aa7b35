"""PostgreSQL: the claim is planned with enable_sort off, so it reads the claim index in order
whatever the planner's statistics say (db/claims.py, claim_jobs()).

The planner is made to prefer sorting by the session's own cost settings: what stale
statistics did to it in the benchmark (a backlog read and sorted on every claim).
"""

import pytest
from django.db import DatabaseError, connection, connections, transaction

from django_dbjobs import enqueue_many
from django_dbjobs.db import direct
from django_dbjobs.models import Job, JobStatus
from tests import jobs

# direct.run() is given Django's connection wrapper itself, as the library's code gives it
# (connections[alias]): given django.db.connection, a proxy, it would take Django's cursor.

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite and MySQL name the index"),
    pytest.mark.django_db(transaction=True),
]

#: Index reads made to look a hundred times dearer than they are: the planner then sorts.
PREFER_SORTING = "SET random_page_cost = 400"


def setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


def claim_plan(through_django: bool = False) -> str:
    """The plan of the claim as claim_jobs() runs it (without_sort), read with EXPLAIN."""
    sql, params = Job.objects.claim_sql("w", 20)
    wrapper = connections["default"]
    if not through_django:
        rows, _names = direct.run(wrapper, f"EXPLAIN {sql}", params, many=True, without_sort=True)
        return "\n".join(row[0] for row in rows)
    statements = []

    def capture(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):  # a hook on the cursor: Django's cursor runs it
        rows, _names = direct.run(wrapper, f"EXPLAIN {sql}", params, many=True, without_sort=True)
    assert "set_config('enable_sort', 'off', true)" in statements[0]
    if connection.get_autocommit():
        assert len(statements) == 1, "one query holding both statements: one round trip"
    return "\n".join(row[0] for row in rows)


@pytest.fixture
def backlog():
    enqueue_many(jobs.add, [(i, i) for i in range(2000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_dbjobs_job")
        cursor.execute(PREFER_SORTING)
        sql, params = Job.objects.claim_sql("w", 20)
        cursor.execute(f"EXPLAIN {sql}", params)
        plain = "\n".join(row[0] for row in cursor.fetchall())
    # The premise: left to its costs, the planner sorts (else this proves nothing).
    assert "Sort" in plain, plain
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET random_page_cost")


@pytest.mark.parametrize("through_django", [False, True], ids=["libpq", "django-cursor"])
def test_the_claim_reads_the_claim_index_in_order_whatever_the_costs(backlog, through_django):
    plan = claim_plan(through_django)
    assert "Index Scan using dbjobs_job_claimable_idx" in plan, plan
    assert "Sort" not in plan, plan
    assert setting("enable_sort") == "on", "off for the claim's own transaction only"


@pytest.mark.parametrize("through_django", [False, True], ids=["libpq", "django-cursor"])
def test_inside_a_transaction_the_callers_setting_is_put_back(backlog, through_django):
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_sort = on")
        assert "Sort" not in claim_plan(through_django)
        assert setting("enable_sort") == "on"
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL work_mem = '1MB'")
            cursor.execute("SET LOCAL enable_sort = off")
        claim_plan(through_django)
        assert setting("enable_sort") == "off", "the caller's own value, not the default"
    assert setting("enable_sort") == "on"


def test_claims_in_order_with_the_planner_preferring_to_sort(backlog):
    claimed = Job.objects.claim("w", 20)
    assert [job.args[0] for job in claimed] == list(range(20))
    assert Job.objects.filter(status=JobStatus.RUNNING).count() == 20


def test_an_error_in_the_pipeline_is_raised_and_leaves_the_connection_usable():
    from psycopg import pq

    def out_of_pipeline_mode():
        return connection.connection.pgconn.pipeline_status == pq.PipelineStatus.OFF

    with pytest.raises(DatabaseError, match="division by zero"):
        direct.run(connections["default"], "SELECT 1 / %s", [0], without_sort=True)
    assert out_of_pipeline_mode()
    assert connection.get_autocommit()
    assert setting("enable_sort") == "on"
    assert direct.run(connections["default"], "SELECT 1 + %s", [1]) == (2,)
    assert direct.run(connections["default"], "SELECT 1 + %s", [2], without_sort=True) == (3,)
    with pytest.raises(DatabaseError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")  # the transaction has begun: libpq.run() takes the next
        try:
            direct.run(connections["default"], "SELECT 1 / %s", [0], without_sort=True)
        finally:
            assert out_of_pipeline_mode()
            assert connection.needs_rollback, "the caller's transaction is marked for rollback"
    assert setting("enable_sort") == "on"
    assert direct.run(connections["default"], "SELECT 2", [], without_sort=True) == (2,)


def test_an_error_through_djangos_cursor_leaves_the_connection_usable():
    with connection.execute_wrapper(lambda execute, *args: execute(*args)):
        with pytest.raises(DatabaseError, match="division by zero"):
            direct.run(connections["default"], "SELECT 1 / %s", [0], without_sort=True)
        assert connection.get_autocommit()
        assert setting("enable_sort") == "on"
        assert direct.run(connections["default"], "SELECT 1 + %s", [1], without_sort=True) == (2,)
