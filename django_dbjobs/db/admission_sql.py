"""The admission's walk over the concurrency keys that have jobs waiting for a slot.

A skip scan of the keyed-jobs index: one index seek per key, so a thousand jobs waiting
behind one key cost one seek, not a read of each. MySQL/MariaDB do it themselves for a
GROUP BY on an index prefix ("loose index scan"); PostgreSQL has no such plan and SQLite
uses one only with statistics, so there it is written out (``WITH RECURSIVE``, one
``MIN()`` seek per key). MariaDB runs that recursive form slowly (about 1.7 s for 500 keys
where its GROUP BY takes 2.5 ms, measured on MariaDB 10.11), hence the two forms.
"""

from __future__ import annotations

from django.db import connections

_statements: dict[tuple, str] = {}


def waiting_keys_sql(model, using: str) -> str:
    """SQL of up to N keys (parameter 2) with jobs waiting for a slot, after a key (parameter 1),
    in key order."""
    connection = connections[using]
    cache_key = (model, using)
    sql = _statements.get(cache_key)
    if sql is not None:
        return sql
    table = connection.ops.quote_name(model._meta.db_table)
    waiting = "status = 'READY' AND blocked = 'CONCURRENCY'"
    if connection.vendor == "mysql":
        # On the plain (blocked, concurrency_key, ...) index: status is not in it, and
        # blocked = 'CONCURRENCY' holds only for READY jobs (indexes.py KeyedJobsIndex).
        sql = (
            f"SELECT concurrency_key FROM {table} WHERE blocked = 'CONCURRENCY' AND concurrency_key > %s"
            " GROUP BY concurrency_key ORDER BY concurrency_key LIMIT %s"
        )
    else:
        sql = f"""
WITH RECURSIVE waiting_keys (k, n) AS (
    SELECT (SELECT MIN(concurrency_key) FROM {table} WHERE {waiting} AND concurrency_key > %s), 1
  UNION ALL
    SELECT (SELECT MIN(concurrency_key) FROM {table} WHERE {waiting} AND concurrency_key > w.k), w.n + 1
    FROM waiting_keys w WHERE w.k IS NOT NULL AND w.n < %s
)
SELECT k FROM waiting_keys WHERE k IS NOT NULL ORDER BY k
"""
    _statements[cache_key] = sql
    return sql
