"""The claim stays an index scan however many finished jobs the table keeps.

A million finished rows and 10,000 ready ones, written by the database itself (the
fastest way to get there), then the query planner is asked about the exact claim
statement the worker runs.
"""

import pytest
from django.db import connection

from django_dbjobs.models import Job
from tests.claim_plans import assert_on_the_claim_index

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FINISHED, READY = 1_000_000, 10_000
COLUMNS = (
    "id, name, args, kwargs, queue, priority, status, attempts, max_attempts,"
    " worker_ids, errors, last_error, run_at, enqueued_at"
)


# Per database: a row source of n numbers, the number column, a 36-character key
# from a one-letter prefix and the number, the time now, and a minute ago.
GENERATORS = {
    "postgresql": (
        "generate_series(1, {n}) AS s(n)",
        "'{p}' || lpad(s.n::text, 35, '0')",
        "now()",
        "now() - interval '1 minute'",
    ),
    "mysql": (
        "seq_1_to_{n} AS s",
        "concat('{p}', lpad(s.seq, 35, '0'))",
        "now(6)",
        "now(6) - interval 1 minute",
    ),
    "sqlite": (
        "(WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < {n})"
        " SELECT n FROM c) AS s",
        "'{p}' || printf('%035d', s.n)",
        "strftime('%Y-%m-%d %H:%M:%f', 'now')",
        "strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 minute')",
    ),
}


def fill(cursor):
    """Insert FINISHED successful and READY due rows with the database's own row generator."""
    vendor = connection.vendor
    rows, key, now, past = GENERATORS[vendor]
    number = "s.seq" if vendor == "mysql" else "s.n"
    for count, prefix, status, priority, run_at in (
        (FINISHED, "f", "SUCCESSFUL", "0", now),
        (READY, "r", "READY", f"{number} % 5", past),
    ):
        cursor.execute(
            f"INSERT INTO django_dbjobs_job ({COLUMNS}) SELECT {key.format(p=prefix)}, 'tests.jobs.add',"
            f" '[]', '{{}}', 'default', {priority}, '{status}', 0, 3, '[]', '[]', '', {run_at}, {now}"
            f" FROM {rows.format(n=count)}"
        )
    if vendor == "mysql":
        cursor.execute("ANALYZE TABLE django_dbjobs_job")
        cursor.fetchall()
    else:
        cursor.execute("ANALYZE django_dbjobs_job" if vendor == "postgresql" else "ANALYZE")


def empty(cursor):
    """Remove the rows fill() wrote, faster than the DELETE that ends a test on MySQL (a minute here)."""
    table = Job._meta.db_table
    if connection.vendor == "postgresql":
        cursor.execute(f"TRUNCATE {table}")
    elif connection.vendor == "mysql":
        cursor.execute(f"TRUNCATE TABLE {table}")
    else:
        cursor.execute(f"DELETE FROM {table}")


def test_claim_is_an_index_scan_with_a_million_finished_jobs():
    with connection.cursor() as cursor:
        fill(cursor)
        try:
            assert Job.objects.filter(status="READY").count() == READY
            # Both shapes of the claim: any ready job, or none waiting to run alone.
            for include_waiting in (True, False):
                sql, params = Job.objects.claim_sql("w", 100, None, include_waiting=include_waiting)
                assert_on_the_claim_index(cursor, sql, params)
        finally:
            empty(cursor)


@pytest.mark.skipif(
    connection.vendor != "sqlite", reason="only SQLite runs without statistics; test_claim covers stale ones"
)
@pytest.mark.parametrize("paused", [frozenset(), frozenset({"emails"})], ids=["all", "one-paused"])
def test_sqlite_claims_on_the_claim_index_without_statistics(paused):
    """Django never runs ANALYZE: the claim must not depend on it (INDEXED BY)."""
    rows, key, now, past = GENERATORS["sqlite"]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO django_dbjobs_job ({COLUMNS}) SELECT {key.format(p='r')}, 'tests.jobs.add',"
            f" '[]', '{{}}', 'default', s.n % 5, 'READY', 0, 3, '[]', '[]', '', {past}, {now}"
            f" FROM {rows.format(n=20_000)}"
        )
        cursor.execute("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'")
        if cursor.fetchone()[0]:  # left by an earlier test's ANALYZE: forget them
            cursor.execute("DELETE FROM sqlite_stat1")
            cursor.execute("ANALYZE sqlite_schema")  # reloads the (now empty) statistics
        sql, params = Job.objects.claim_sql("w", 100, None, paused=paused)
        assert_on_the_claim_index(cursor, sql, params)
    assert len(Job.objects.claim("w", 100, paused=paused)) == 100
