"""The rows of bench/growth.py's tables, made by the server: the big table's, and a few old ones.

The big table is filled with its primary key and the finished jobs' index dropped, each
made again after the rows in one sorted build. A table reused with one missing (a fill
killed midway) has it made again first.
"""

from __future__ import annotations

import time

CHUNK = 1_000_000
#: Rows over which the kept counts may fall (claims and retention) before a fill tops up.
SLACK = 10_000
# One row per generate_series value `n`, made by the server. `at` spreads the rows over
# the past `span`; the id is a UUIDv7 of that time, in the order of n, its other bits the
# salt (six hex digits) and n (a hash of n cost a third of the fill's time).
ROWS_SQL = """
INSERT INTO django_dbjobs_job (
    id, name, args, kwargs, queue, priority, status, run_at, attempts, max_attempts, worker,
    worker_ids, enqueued_at, started_at, last_attempted_at, finished_at, return_value, errors,
    last_error, isolation, pickups, blocked, has_dependents)
SELECT
    substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 1, 3) || '-8' || substr(r, 4, 3)
        || '-' || substr(r, 7, 12),
    'bench.jobs.noop', '[]', '{{}}', 'default', 0, %(status)s, at, %(attempts)s, 3, %(worker)s,
    %(worker_ids)s::jsonb, at, {finished}, {finished}, {finished}, NULL, '[]', '', '',
    %(attempts)s, '', FALSE
FROM (
    SELECT n, at,
        lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') AS h,
        %(salt)s || lpad(to_hex(n), 12, '0') AS r
    FROM (
        SELECT n, now() - %(span)s::interval + (%(span)s::interval * n / %(count)s) AS at
        FROM generate_series(%(first)s, %(last)s) AS n
    ) AS timed
) AS made
"""
FINISHED = {
    "status": "SUCCESSFUL",
    "attempts": 1,
    "worker": "bench-growth-worker",
    "worker_ids": '["bench-growth-worker"]',
    "salt": "f00000",
}
READY = {
    "status": "READY",
    "attempts": 0,
    "worker": None,
    "worker_ids": "[]",
    "salt": "e00000",
}
#: The job table's primary key: PostgreSQL's name for it.
PRIMARY_KEY = "django_dbjobs_job_pkey"
#: The partial indexes that finished jobs enter, dropped during a fill with the primary key.
#: The others stay: a build reads the whole table, a row they skip costs a test of their
#: condition, and the unique constraint's index of (name, NULL) takes its rows at its end
#: (and stays deduplicated: built after the rows, it is six times larger).
BULK_INDEXES = {"dbjobs_job_finished_idx"}
#: The finished jobs' span: retention (bench/growth_rounds.py, a day's keep) finds six
#: sevenths of them past their keep time, the oldest first.
FINISHED_SPAN = "7 days"


def insert_rows(cursor, values: dict, count: int, span: str, progress: bool = False) -> None:
    """Insert `count` rows of `values` (FINISHED or READY) spread over the past `span`, a chunk at a time."""
    sql = ROWS_SQL.format(finished="at" if values["status"] == "SUCCESSFUL" else "NULL")
    for first in range(0, count, CHUNK):
        last = min(first + CHUNK, count) - 1
        cursor.execute(sql, {**values, "first": first, "last": last, "count": count, "span": span})
        if progress:
            print(f"  {values['status']}: {last + 1:,} of {count:,} rows", flush=True)


def counts() -> tuple[int, int]:
    """(finished, ready) jobs in the table, each counted on its partial index."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM django_dbjobs_job WHERE status = 'SUCCESSFUL'),"
            " (SELECT count(*) FROM django_dbjobs_job WHERE status = 'READY')"
        )
        return cursor.fetchone()


def fill(finished: int, ready: int, refill: bool) -> str:
    """Make the big table (or reuse it, topping its ready jobs up); say what it holds."""
    from django.db import connection

    have_finished, have_ready = counts()
    if not refill and have_finished >= finished - SLACK:
        restore_indexes()
        if have_ready >= ready - SLACK:
            return f"{have_finished:,} finished and {have_ready:,} ready jobs, reused"
        with connection.cursor() as cursor:  # claims took them: make as many again
            insert_rows(
                cursor, {**READY, "salt": f"{int(time.time()) % 0xFFFFFF:06x}"}, ready - have_ready, "1 hour"
            )
            cursor.execute("VACUUM (ANALYZE) django_dbjobs_job")
        added = ready - have_ready
        return f"{have_finished:,} finished and {ready:,} ready jobs, reused ({added:,} ready made again)"
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE django_dbjobs_job")
        drop_indexes()
        insert_rows(cursor, FINISHED, finished, FINISHED_SPAN, progress=True)
        insert_rows(cursor, READY, ready, "1 hour", progress=True)
        inserted = time.perf_counter()
        restore_indexes()
        indexed = time.perf_counter()
        cursor.execute("VACUUM (ANALYZE) django_dbjobs_job")
        cursor.execute("SELECT pg_total_relation_size('django_dbjobs_job')")
        size = cursor.fetchone()[0]
    ended = time.perf_counter()
    rows = finished + ready
    print(
        f"  fill: rows {inserted - started:.0f} s, indexes {indexed - inserted:.0f} s, "
        f"vacuum {ended - indexed:.0f} s: {rows / (ended - started):,.0f} rows a second, "
        f"{size / rows * 1e6 / 2**20:,.0f} MiB per million rows ({size / 2**30:.1f} GiB)",
        flush=True,
    )
    return f"{finished:,} finished and {ready:,} ready jobs, made in {ended - started:.0f} s"


def drop_indexes() -> None:
    """Drop the job table's primary key and BULK_INDEXES (those it has)."""
    from django.db import connection

    from django_dbjobs.models import Job

    present = constraint_names()
    with connection.schema_editor() as editor:
        if PRIMARY_KEY in present:  # no foreign key points at the job table
            editor.execute(f"ALTER TABLE {Job._meta.db_table} DROP CONSTRAINT {PRIMARY_KEY}")
        for index in bulk_indexes():
            if index.name in present:
                editor.remove_index(Job, index)


def restore_indexes() -> None:
    """Make the job table's primary key and BULK_INDEXES if missing, with memory to sort in."""
    from django.db import connection

    from django_dbjobs.models import Job

    present = constraint_names()
    missing = [index for index in bulk_indexes() if index.name not in present]
    if PRIMARY_KEY in present and not missing:
        return
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
    try:
        with connection.schema_editor() as editor:
            if PRIMARY_KEY not in present:
                editor.execute(f"ALTER TABLE {Job._meta.db_table} ADD PRIMARY KEY (id)")
            for index in missing:
                editor.add_index(Job, index)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET maintenance_work_mem")


def bulk_indexes() -> list:
    """The job model's indexes named in BULK_INDEXES."""
    from django_dbjobs.models import Job

    return [index for index in Job._meta.indexes if index.name in BULK_INDEXES]


def constraint_names() -> set[str]:
    """The names of the job table's indexes and constraints."""
    from django.db import connection

    with connection.cursor() as cursor:
        return set(connection.introspection.get_constraints(cursor, "django_dbjobs_job"))
