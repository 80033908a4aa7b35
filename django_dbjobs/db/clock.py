"""The database clock: its SQL on each database, one read of it, and it as an expression."""

from __future__ import annotations

import datetime

from django.db import connections, models
from django.db.models.functions import Now

#: The database clock in hand-written SQL (``%%``: the statements take parameters).
NOW_SQL = {
    "postgresql": "STATEMENT_TIMESTAMP()",
    "mysql": "CURRENT_TIMESTAMP(6)",
    "sqlite": "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW')",
}


def seconds_from_now(seconds: float) -> models.Expression:
    """The database clock plus `seconds`, as an expression for an UPDATE."""
    return Now() + datetime.timedelta(seconds=seconds)


def database_now(using: str = "default"):
    """The database clock as the driver returns it (SQLite: text; MySQL: naive UTC)."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {NOW_SQL[connection.vendor]}", [])  # [] so "%%" becomes "%"
        return cursor.fetchone()[0]


def as_datetime(raw, field, connection):
    """A value the driver returned for `field` (a DateTimeField), as the ORM would give it."""
    for converter in connection.ops.get_db_converters(field.cached_col) + field.get_db_converters(connection):
        raw = converter(raw, field.cached_col, connection)
    return raw
