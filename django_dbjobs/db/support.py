"""Which databases workers can run on safely, and the SQLite settings they need."""

from __future__ import annotations

import sqlite3

from django.db import connections

from ..exceptions import UnsupportedDatabase
from .row_locks import can_skip_locked

SQLITE_RECOMMENDED_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}

#: SQLite gained UPDATE ... RETURNING, which the claim needs, in 3.35.
MIN_SQLITE_VERSION = (3, 35)


def ensure_supported(using: str = "default") -> None:
    """Raise UnsupportedDatabase where concurrent workers would be unsafe or stall."""
    reason = unsupported_reason(using)
    if reason is not None:
        raise UnsupportedDatabase(reason)


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


def sqlite_settings_problems(settings_dict: dict) -> list[str]:
    """Return which of SQLITE_RECOMMENDED_OPTIONS an SQLite database is missing."""
    options = settings_dict.get("OPTIONS", {})
    problems = []
    if str(options.get("transaction_mode", "")).upper() not in ("IMMEDIATE", "EXCLUSIVE"):
        problems.append("transaction_mode")
    if "journal_mode=wal" not in str(options.get("init_command", "")).lower().replace(" ", ""):
        problems.append("init_command")
    return problems
