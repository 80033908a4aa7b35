"""The live jobs are counted by queue from dbjobs_job_active_idx alone, on every database."""

import datetime

import pytest
from django.db import connection
from django.utils import timezone

from django_dbjobs.models import Job, JobStatus
from django_dbjobs.operations.queue_stats import live_jobs_by_queue

pytestmark = pytest.mark.django_db(transaction=True)
INDEX = "dbjobs_job_active_idx"


def many_finished_few_live() -> None:
    """3,000 finished jobs, 30 ready and 10 running: the shape the index is for."""
    past = timezone.now() - datetime.timedelta(hours=1)
    rows = [
        Job(name="tests.jobs.add", queue=f"q{n % 3}", status=JobStatus.SUCCESSFUL, finished_at=past)
        for n in range(3000)
    ]
    rows += [Job(name="tests.jobs.add", queue=f"q{n % 3}", run_at=past) for n in range(30)]
    rows += [
        Job(name="tests.jobs.add", queue="q0", status=JobStatus.RUNNING, worker="h:1:a") for _ in range(10)
    ]
    Job.objects.bulk_create(rows, batch_size=500)
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute("ANALYZE TABLE django_dbjobs_job")
            cursor.fetchall()
        else:
            # VACUUM too: it marks the pages all-visible, as autovacuum does, which an
            # index-only scan needs on PostgreSQL.
            cursor.execute(
                "VACUUM ANALYZE django_dbjobs_job" if connection.vendor == "postgresql" else "ANALYZE"
            )


def plan(sql: str, params) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # A table this small is cheaper to scan: ask whether the index can serve at all.
            cursor.execute("SET enable_seqscan = off")
            try:
                cursor.execute(f"EXPLAIN {sql}", params)
                return "\n".join(row[0] for row in cursor.fetchall())
            finally:
                cursor.execute("RESET enable_seqscan")
        if connection.vendor == "mysql":
            cursor.execute(f"EXPLAIN {sql}", params)
            names = [column[0] for column in cursor.description]
            return "\n".join(str(dict(zip(names, row, strict=True))) for row in cursor.fetchall())
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


def test_the_gauges_count_the_live_jobs_from_the_index_alone():
    many_finished_few_live()
    sql, params = live_jobs_by_queue(hand_backs=False).query.sql_with_params()
    found = plan(sql, params)
    if connection.vendor == "postgresql":
        assert f"Index Only Scan using {INDEX}" in found, found
    elif connection.vendor == "mysql":
        assert f"'key': '{INDEX}'" in found and "Using index" in found, found
    else:
        assert f"USING COVERING INDEX {INDEX}" in found, found
    counts = {
        (queue, status): count for queue, status, _due, _blocked, count, _oldest, _ in live_jobs_by_queue()
    }
    assert counts == {
        ("q0", "READY"): 10,
        ("q1", "READY"): 10,
        ("q2", "READY"): 10,
        ("q0", "RUNNING"): 10,
    }


def test_finished_jobs_are_not_in_the_partial_index():
    if not connection.features.supports_partial_indexes:
        pytest.skip("MySQL/MariaDB index every row")
    many_finished_few_live()
    sql, params = Job.objects.filter(status=JobStatus.SUCCESSFUL).values_list("queue").query.sql_with_params()
    assert INDEX not in plan(sql, params)
