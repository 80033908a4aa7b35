"""Everything that differs by database, and nothing else.

Each helper says which databases need it and why. Everything outside this module
asks these helpers (or Django's feature flags) instead of looking at the vendor.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator

from django.db import connections, models, transaction
from django.db.models import Q
from django.db.models.functions import Now

from .exceptions import UnsupportedDatabase

SQLITE_RECOMMENDED_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


class ReadyJobsIndex(models.Index):
    """The claim index: over READY rows only, where the database has partial indexes.

    MySQL and MariaDB have no partial indexes (Django would drop the condition and
    warn, models.W037), so there the index is a plain one led by the status column,
    which serves ``WHERE status = 'READY' ORDER BY ...`` as well. The condition is
    added here rather than passed to Index, so no Django version warns about it.
    """

    def create_sql(self, model, schema_editor, using="", **kwargs):
        if schema_editor.connection.features.supports_partial_indexes:
            index = models.Index(fields=self.fields, name=self.name, condition=Q(status="READY"))
        else:
            index = models.Index(fields=["status", *self.fields], name=self.name)
        return index.create_sql(model, schema_editor, using=using, **kwargs)


class JsonAppend(models.Func):
    """A JSON array column with one string appended, computed by the database.

    Used in the claim's UPDATE to record each attempt's worker without reading the
    row first. PostgreSQL: ``||``; MySQL/MariaDB: JSON_ARRAY_APPEND; SQLite: json_insert.
    """

    output_field = models.JSONField()

    def __init__(self, field: str, value: str):
        super().__init__(models.F(field), models.Value(value))

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(
            compiler,
            connection,
            template="(%(expressions)s::text))",
            arg_joiner=" || jsonb_build_array(",
            **extra,
        )

    def as_mysql(self, compiler, connection, **extra):
        return self.as_sql(
            compiler,
            connection,
            template="JSON_ARRAY_APPEND(%(expressions)s)",
            arg_joiner=", '$', ",
            **extra,
        )

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(
            compiler,
            connection,
            template="json_insert(%(expressions)s)",
            arg_joiner=", '$[#]', ",
            **extra,
        )


def can_skip_locked(using: str = "default") -> bool:
    """True where row locks with SKIP LOCKED exist (PostgreSQL, MySQL 8, MariaDB 10.6+)."""
    return connections[using].features.has_select_for_update_skip_locked


def ensure_supported(using: str = "default") -> None:
    """Raise UnsupportedDatabase where concurrent workers would be unsafe or stall.

    MySQL before 8.0.1 and MariaDB before 10.6 accept FOR UPDATE but not SKIP LOCKED,
    so workers would queue behind each other's locks.
    """
    connection = connections[using]
    if connection.features.has_select_for_update and not can_skip_locked(using):
        connection.ensure_connection()
        raise UnsupportedDatabase(
            f"{connection.display_name} {connection.get_database_version()} has no "
            "SELECT ... FOR UPDATE SKIP LOCKED; django_dbjobs needs PostgreSQL, "
            "MySQL 8.0.1+ or MariaDB 10.6+."
        )


def lock_for_claim(queryset: models.QuerySet) -> models.QuerySet:
    """Lock the rows a claim selects, skipping rows other workers hold.

    SQLite has no row locks; its claim transaction holds the database write lock
    instead (see claim_transaction), so the queryset is returned as it is.
    """
    if can_skip_locked(queryset.db):
        return queryset.select_for_update(skip_locked=True)
    return queryset


@contextlib.contextmanager
def claim_transaction(using: str = "default") -> Iterator[None]:
    """A short transaction for claiming jobs.

    SQLite: a deferred transaction that reads and then writes can fail at once with
    "database is locked" when another connection wrote in between, whatever the busy
    timeout. Unless the connection already begins IMMEDIATE transactions, a no-op
    UPDATE takes the write lock before the claim reads anything.
    """
    connection = connections[using]
    with transaction.atomic(using=using):
        if connection.vendor == "sqlite" and not sqlite_begins_immediate(using):
            with connection.cursor() as cursor:
                cursor.execute("UPDATE dbjobs_job SET id = id WHERE 0")
        yield


def sqlite_begins_immediate(using: str = "default") -> bool:
    """True if this SQLite connection starts transactions with BEGIN IMMEDIATE."""
    options = connections[using].settings_dict.get("OPTIONS", {})
    return str(options.get("transaction_mode", "")).upper() in ("IMMEDIATE", "EXCLUSIVE")


def seconds_from_now(seconds: float) -> models.Expression:
    """The database clock plus `seconds`, as an expression for an UPDATE."""
    return Now() + datetime.timedelta(seconds=seconds)


def rejects_nul(using: str = "default") -> bool:
    """True where text and JSON columns cannot store U+0000 (PostgreSQL)."""
    return connections[using].vendor == "postgresql"


def sqlite_settings_problems(settings_dict: dict) -> list[str]:
    """Return which of SQLITE_RECOMMENDED_OPTIONS an SQLite database is missing."""
    options = settings_dict.get("OPTIONS", {})
    problems = []
    if str(options.get("transaction_mode", "")).upper() not in ("IMMEDIATE", "EXCLUSIVE"):
        problems.append("transaction_mode")
    if "journal_mode=wal" not in str(options.get("init_command", "")).lower().replace(" ", ""):
        problems.append("init_command")
    return problems
