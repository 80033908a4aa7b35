"""The admission's search for concurrency keys that can take a job now, in one statement.

Written out by hand: a skip scan (``WITH RECURSIVE``, one index seek per key) that none
of the three databases does by itself, over the keyed-jobs index. A thousand jobs
waiting behind one key cost one seek, not a read of each. Standard SQL on PostgreSQL,
MySQL 8 / MariaDB 10.6+ and SQLite; only the clock differs.
"""

from __future__ import annotations

from django.db import connections

from .claims import NOW_SQL

_statements: dict[tuple, str] = {}


def admissible_keys_sql(model, using: str) -> str:
    """SQL returning up to %s keys (parameter: how many) that have a due job waiting for a
    slot and fewer slots in use than that job's limit, in key order."""
    connection = connections[using]
    key = (model, using)
    sql = _statements.get(key)
    if sql is not None:
        return sql
    table = connection.ops.quote_name(model._meta.db_table)
    now = NOW_SQL[connection.vendor]
    waiting = f"{table}.status = 'READY' AND {table}.blocked = 'CONCURRENCY'"
    sql = f"""
WITH RECURSIVE waiting_keys (k, n) AS (
    SELECT (SELECT MIN(concurrency_key) FROM {table} WHERE {waiting} AND concurrency_key IS NOT NULL), 1
  UNION ALL
    SELECT (SELECT MIN(concurrency_key) FROM {table} WHERE {waiting} AND concurrency_key > w.k), w.n + 1
    FROM waiting_keys w WHERE w.k IS NOT NULL AND w.n < %s
)
SELECT k FROM (
    SELECT w.k AS k,
        (SELECT COUNT(*) FROM {table} WHERE {table}.status IN ('READY', 'RUNNING')
            AND {table}.blocked = '' AND {table}.concurrency_key = w.k) AS held,
        (SELECT {table}.concurrency_limit FROM {table} WHERE {waiting} AND {table}.concurrency_key = w.k
            AND {table}.run_at <= {now}
            ORDER BY {table}.priority DESC, {table}.run_at, {table}.id LIMIT 1) AS first_limit
    FROM waiting_keys w WHERE w.k IS NOT NULL
) admissible WHERE first_limit IS NOT NULL AND held < first_limit ORDER BY k
"""
    _statements[key] = sql
    return sql
