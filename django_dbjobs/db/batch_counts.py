"""The one UPDATE that counts outcomes for a batch and finishes it when they reach its total."""

from __future__ import annotations

from django.db import connections

from .claims import NOW_SQL

#: The batch columns read back, in the order Batch's fields name them.
COLUMNS = (
    "id",
    "description",
    "total",
    "succeeded",
    "failed",
    "on_success",
    "on_failure",
    "on_complete",
    "created_at",
    "finished_at",
)


def add_to_batch(model, using: str, batch_id: str, succeeded: int, failed: int, total: int):
    """Add to a batch's counts (and its total); set ``finished_at`` if they now reach the total.

    Return the batch as this changed it, or None if it had finished already. The row stays
    locked until the caller's transaction ends: concurrent calls take turns, and exactly one
    sees the counts reach the total.

    ``finished_at`` comes first in the SET list: MySQL evaluates assignments left to right
    with the values already assigned, the others with the old ones; first, every database
    compares the old counts. PostgreSQL and SQLite return the row; MySQL/MariaDB read it
    back (a row this transaction changed reads as changed).
    """
    connection = connections[using]
    vendor = connection.vendor
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    sql = (
        f"UPDATE {table} SET finished_at = CASE WHEN total <= succeeded + failed + %s"
        f" THEN {NOW_SQL[vendor]} ELSE NULL END,"
        " succeeded = succeeded + %s, failed = failed + %s, total = total + %s"
        " WHERE id = %s AND finished_at IS NULL"
    )
    params = [succeeded + failed - total, succeeded, failed, total, batch_id]
    if vendor != "mysql":
        found = list(model._base_manager.raw(sql + " RETURNING " + ", ".join(COLUMNS), params).using(using))
        return found[0] if found else None
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        changed = cursor.rowcount
    return model._base_manager.using(using).get(pk=batch_id) if changed else None
