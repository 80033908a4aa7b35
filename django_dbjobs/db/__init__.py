"""Everything that differs by database, and nothing else.

Each helper says which databases need it and why. Everything outside this module
asks these helpers (or Django's feature flags) instead of looking at the vendor.
"""

from __future__ import annotations

import datetime
import sqlite3
import unicodedata

from django.db import connections, models
from django.db.models.functions import Now

from ..exceptions import UnsupportedDatabase
from .errors import ErrorKind, classify, is_lock_conflict
from .indexes import (
    BatchJobsIndex,
    FailedJobsIndex,
    FinishedJobsIndex,
    KeyedJobsIndex,
    PartialIndex,
    RatedJobsIndex,
    ReadyJobsIndex,
    RunningJobsIndex,
    UncountedEdgesIndex,
    UniqueKeyIndex,
)
from .migration_history import pending_migrations, require_migrated
from .triggers import CHANNEL

__all__ = [
    "ErrorKind",
    "is_lock_conflict",
    "FailedJobsIndex",
    "FinishedJobsIndex",
    "KeyedJobsIndex",
    "BatchJobsIndex",
    "PartialIndex",
    "RatedJobsIndex",
    "ReadyJobsIndex",
    "RunningJobsIndex",
    "UncountedEdgesIndex",
    "UniqueKeyIndex",
    "error_kind",
    "pending_migrations",
    "require_migrated",
]

SQLITE_RECOMMENDED_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


def error_kind(exc: BaseException, using: str = "default") -> ErrorKind:
    """Whether `exc` is an outage (wait it out), bad data (fail one job) or a setup error."""
    return classify(exc, connections[using].vendor)


def lock_or_skip(queryset):
    """`queryset` locking its rows, skipping those another transaction holds (SQLite: no-op).

    PostgreSQL takes FOR NO KEY UPDATE, which a foreign key check on the row (FOR KEY
    SHARE, as inserting a child row takes) does not block.
    """
    features = connections[queryset.db].features
    return queryset.select_for_update(
        skip_locked=features.has_select_for_update_skip_locked,
        no_key=features.has_select_for_no_key_update,
    )


def can_skip_locked(using: str = "default") -> bool:
    """True where row locks with SKIP LOCKED exist (PostgreSQL, MySQL 8, MariaDB 10.6+)."""
    return connections[using].features.has_select_for_update_skip_locked


def ensure_supported(using: str = "default") -> None:
    """Raise UnsupportedDatabase where concurrent workers would be unsafe or stall."""
    reason = unsupported_reason(using)
    if reason is not None:
        raise UnsupportedDatabase(reason)


#: SQLite gained UPDATE ... RETURNING, which the claim needs, in 3.35.
MIN_SQLITE_VERSION = (3, 35)


def unsupported_reason(using: str = "default") -> str | None:
    """Why workers cannot run safely on this database, or None.

    MySQL before 8.0.1 and MariaDB before 10.6 accept FOR UPDATE but not SKIP LOCKED,
    so workers would queue behind each other's locks; SQLite before 3.35 has no
    RETURNING, which the claim needs.
    """
    connection = connections[using]
    if connection.vendor == "sqlite" and sqlite_version() < MIN_SQLITE_VERSION:
        return (
            f"SQLite {'.'.join(map(str, sqlite_version()))} has no UPDATE ... RETURNING; django_dbjobs needs "
            f"SQLite {'.'.join(map(str, MIN_SQLITE_VERSION))} or newer."
        )
    if connection.features.has_select_for_update and not can_skip_locked(using):
        connection.ensure_connection()
        return (
            f"{connection.display_name} {connection.get_database_version()} has no "
            "SELECT ... FOR UPDATE SKIP LOCKED; django_dbjobs needs PostgreSQL, "
            "MySQL 8.0.1+ or MariaDB 10.6+."
        )
    return None


def sqlite_version() -> tuple[int, ...]:
    """The version of the SQLite library Python's sqlite3 module uses."""
    return sqlite3.sqlite_version_info


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


def rejects_nul(using: str = "default") -> bool:
    """True where text and JSON columns cannot store U+0000 (PostgreSQL)."""
    return connections[using].vendor == "postgresql"


def supports_listen(using: str = "default") -> bool:
    """True where workers can LISTEN for NOTIFY (PostgreSQL through psycopg 3.2+)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return False
    try:
        import psycopg
    except ImportError:  # psycopg2: polling only
        return False
    return hasattr(psycopg.Connection, "notifies")


def notify_workers(using: str = "default") -> None:
    """Wake idle workers when this transaction commits: PostgreSQL's NOTIFY (the triggers
    send it for new and READY-again jobs; a job made claimable otherwise needs this).
    Elsewhere workers find such jobs at their next poll or probe."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [CHANNEL])


def idle_check_steps(using: str = "default") -> tuple[float, float] | None:
    """Seconds between an idle worker's checks for other processes' commits: (first, longest).

    None where LISTEN/NOTIFY wakes workers instead (PostgreSQL). SQLite reads
    ``PRAGMA data_version`` every 10 ms (memory only); MySQL/MariaDB run an indexed
    probe, every 10 ms at first and every 50 ms after a while idle.
    """
    return {"sqlite": (0.01, 0.01), "mysql": (0.01, 0.05)}.get(connections[using].vendor)


def uses_data_version(using: str = "default") -> bool:
    """True where PRAGMA data_version tells that another connection committed (SQLite)."""
    return connections[using].vendor == "sqlite"


def data_version(using: str = "default") -> int:
    """SQLite: a counter that changes when another connection commits (nearly free)."""
    with connections[using].cursor() as cursor:
        cursor.execute("PRAGMA data_version")
        return cursor.fetchone()[0]


def sqlite_settings_problems(settings_dict: dict) -> list[str]:
    """Return which of SQLITE_RECOMMENDED_OPTIONS an SQLite database is missing."""
    options = settings_dict.get("OPTIONS", {})
    problems = []
    if str(options.get("transaction_mode", "")).upper() not in ("IMMEDIATE", "EXCLUSIVE"):
        problems.append("transaction_mode")
    if "journal_mode=wal" not in str(options.get("init_command", "")).lower().replace(" ", ""):
        problems.append("init_command")
    return problems


def on_index(sql: str, connection, table: str, index: str) -> str:
    """`sql`, reading `table` on `index`: ``INDEXED BY`` on SQLite, ``FORCE INDEX`` on
    MySQL/MariaDB; unchanged on PostgreSQL, which has no index hints. `sql` must name the
    table once, as Django's compiler writes it (quoted, followed by a space)."""
    vendor = connection.vendor
    if vendor not in ("sqlite", "mysql"):
        return sql
    quote = connection.ops.quote_name
    source = f"FROM {quote(table)} "
    if sql.count(source) != 1:
        raise AssertionError(f"Unexpected SQL: {sql}")
    hint = f"INDEXED BY {quote(index)}" if vendor == "sqlite" else f"FORCE INDEX ({quote(index)})"
    return sql.replace(source, f"{source}{hint} ")


def pks_on_index(queryset, index: str, limit: int) -> list:
    """The primary keys of `queryset` (ordered and locked as it says), at most `limit`, read on `index`.

    MySQL/MariaDB only (``FORCE INDEX``): without it the planner may read another index
    and sort, and a locking read that sorts locks every row it matched, not only those
    its LIMIT keeps (others' ``SKIP LOCKED`` reads then find nothing). PostgreSQL plans
    it well; SQLite has no row locks.
    """
    using = queryset.db
    connection = connections[using]
    picked = queryset.values_list("pk")[:limit]
    if connection.vendor != "mysql":
        return [row[0] for row in picked]
    sql, params = picked.query.get_compiler(using=using).as_sql()
    sql = on_index(sql, connection, queryset.model._meta.db_table, index)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


from .batch_counts import add_to_batch  # noqa: E402
from .claims import APPEND_SQL, JSON_PLACEHOLDER, NOW_SQL, claim_jobs, claim_sql  # noqa: E402 - the hot-path SQL, kept in its own modules
from .completions import WithoutLastWorker, finish_successes, finish_workflow_successes  # noqa: E402

__all__ += [
    "on_index",
    "pks_on_index",
    "APPEND_SQL",
    "JSON_PLACEHOLDER",
    "NOW_SQL",
    "WithoutLastWorker",
    "claim_jobs",
    "claim_sql",
    "finish_successes",
    "finish_workflow_successes",
    "add_to_batch",
]


def key_fold(using: str = "default"):
    """How the database tells text keys apart, as a function making equal keys equal.

    MySQL/MariaDB: their default collations (``utf8mb4_general_ci``, ``..._0900_ai_ci``)
    ignore case, accents and trailing spaces, so ``GROUP BY`` returns one spelling of
    several; this folds them alike (a close approximation: keys it folds together that the
    collation tells apart only cost the admission a needless look). Elsewhere: as stored.
    """
    if connections[using].vendor != "mysql":
        return _same
    return _fold_like_collation


def _same(key: str) -> str:
    return key


def _fold_like_collation(key: str) -> str:
    decomposed = unicodedata.normalize("NFKD", key.casefold())
    return "".join(char for char in decomposed if not unicodedata.combining(char)).rstrip(" ")
