"""The database clock of many new rows, read once: ``run_at`` and ``enqueued_at`` of a bulk insert.

Reading ``run_at`` and ``enqueued_at`` back from every row (``RETURNING``) costs a
multi-row INSERT about a third of its time; one ``SELECT`` of the clock, sent back as a
value all rows share, gives the same database time for far less.
"""

from __future__ import annotations

from typing import Any

from .. import db
from ..models import Job
from .rows import field_specs


def clock_values(connection, shape: tuple) -> tuple[dict[str, Any], tuple]:
    """One read of the clock: the values of `shape`'s database-filled fields ('d'), by
    attribute name, and the shape with them shared by every row ('s') instead."""
    raw = db.database_now(connection.alias)
    values, filled = {}, []
    for spec, kind in zip(field_specs(), shape, strict=True):
        if kind == "d":
            values[spec.attname] = db.as_datetime(raw, spec.field, connection)
        filled.append("s" if kind == "d" else kind)
    return values, tuple(filled)


def fill_clock(connection, shape: tuple, group: list[Job]) -> tuple:
    """Set the database-clock fields of the jobs of `group` from one read; return the new shape."""
    values, shape = clock_values(connection, shape)
    for job in group:
        for name, value in values.items():
            setattr(job, name, value)
    return shape
