"""One hand-written statement on the hot path, run as Django's cursor runs it, without its wrapper.

Django's ``CursorWrapper`` costs tens of microseconds a statement, and the interpreter runs
it cold after each round trip. For the statements a single enqueue and a claim run, run()
keeps what the wrapper does that matters (the connection's health check, the check for a
broken transaction, Django's exceptions, the rollback mark inside ``atomic``) and runs the
statement through libpq on PostgreSQL (libpq.py) or on the backend's own cursor. Where
something watches queries (``execute_wrapper()``, query logging under ``DEBUG`` or
``assertNumQueries``) it runs on Django's cursor, so they see it as before.
"""

from __future__ import annotations

from typing import Any

from . import libpq

_statements: dict[str, bytes] = {}


def run(connection, sql: str, params: list[Any], many: bool = False):
    """Run `sql` (``%s`` placeholders) on `connection`: its first row (None if none); with
    `many`, (every row, the column names)."""
    if connection.execute_wrappers or connection.queries_logged:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return _fetched(cursor, many)
    try:
        connection.close_if_health_check_failed()  # what connection.cursor() does first
        connection.ensure_connection()
        connection.validate_no_broken_transaction()
        with connection.wrap_database_errors:
            if connection.vendor == "postgresql":
                statement = _statements.get(sql)
                if statement is None:
                    if len(_statements) >= 1024:
                        _statements.clear()
                    statement = _statements[sql] = libpq.query(sql)[0]
                done = libpq.run(connection, statement, params, many)
                if done is not None:
                    return done if many else (done[0] if done else None)
            cursor = connection.create_cursor()
            try:
                cursor.execute(sql, params)
                return _fetched(cursor, many)
            finally:
                cursor.close()
    except Exception as exc:  # as transaction.mark_for_rollback_on_error() does
        if connection.in_atomic_block:
            connection.needs_rollback = True
            connection.rollback_exc = exc
        raise


def _fetched(cursor, many: bool):
    if many:
        return cursor.fetchall(), [column[0] for column in cursor.description]
    return cursor.fetchone()
