"""Claiming rows a caller picked and locked itself (the rate-limited queues' claims)."""

from __future__ import annotations

from django.db import connections

from .claims import as_claimed, claim_mark
from .rows_read import jobs_from_cursor


def claim_locked(model, using: str, worker: str, ids: list) -> list:
    """Mark these READY jobs, locked by the caller's transaction, RUNNING for `worker`; return them.

    For a claim that picked its rows itself (flow/rates.py). PostgreSQL and SQLite: one
    ``UPDATE ... RETURNING``; MySQL/MariaDB: the rows, then the UPDATE.
    """
    if not ids:
        return []
    connection = connections[using]
    table = connection.ops.quote_name(model._meta.db_table)
    marks = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        if connection.vendor != "mysql":
            columns = ", ".join(connection.ops.quote_name(f.column) for f in model._meta.concrete_fields)
            cursor.execute(
                f"{claim_mark(model, using)} WHERE id IN ({marks}) AND status = 'READY' RETURNING {columns}",
                [worker, worker, *ids],
            )
            jobs = jobs_from_cursor(model, using, cursor)
            jobs.sort(key=lambda j: (-j.priority, j.run_at, j.pk))
            return jobs
        cursor.execute(f"SELECT * FROM {table} WHERE id IN ({marks}) AND status = 'READY'", ids)
        jobs = jobs_from_cursor(model, using, cursor)
        cursor.execute(f"{claim_mark(model, using)} WHERE id IN ({marks})", [worker, worker, *ids])
    jobs.sort(key=lambda j: (-j.priority, j.run_at, j.pk))
    return as_claimed(jobs, worker)
