"""The one UPDATE that counts outcomes for a batch and finishes it when they reach its total."""

from __future__ import annotations

from django.db import connections

from .clock import NOW_SQL


def add_to_batch(model, using: str, batch_id: str, succeeded: int, failed: int, total: int) -> bool:
    """Add to a batch's counts (and its total); set ``finished_at`` if they now reach the total.

    Return whether this call finished the batch. The row stays locked until the caller's
    transaction ends: concurrent calls take turns, and exactly one sees the counts reach
    the total (a batch finished already is left alone: ``finished_at IS NULL``).

    ``finished_at`` comes first in the SET list: MySQL evaluates assignments left to right
    with the values already assigned, the others with the old ones; first, every database
    compares the old counts. PostgreSQL and SQLite return ``finished_at`` (SQLite 3.40
    answered ``RETURNING finished_at IS NOT NULL`` with 1 for a NULL); MySQL/MariaDB read
    it back (a row this transaction changed reads as changed). Plain cursor work: it runs
    under the batch row's lock, on SQLite under the one write lock, so it does as little
    as it can.
    """
    connection = connections[using]
    vendor = connection.vendor
    table = connection.ops.quote_name(model._meta.db_table)
    sql = (
        f"UPDATE {table} SET finished_at = CASE WHEN total <= succeeded + failed + %s"
        f" THEN {NOW_SQL[vendor]} ELSE NULL END,"
        " succeeded = succeeded + %s, failed = failed + %s, total = total + %s"
        " WHERE id = %s AND finished_at IS NULL"
    )
    params = [succeeded + failed - total, succeeded, failed, total, batch_id]
    with connection.cursor() as cursor:
        if vendor != "mysql":
            cursor.execute(sql + " RETURNING finished_at", params)
            row = cursor.fetchone()
            return row is not None and row[0] is not None
        cursor.execute(sql, params)
        if not cursor.rowcount:
            return False
        cursor.execute(f"SELECT finished_at FROM {table} WHERE id = %s", [batch_id])
        return cursor.fetchone()[0] is not None
