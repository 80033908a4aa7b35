"""One hand-written statement on the hot path, run as Django's cursor runs it, without its wrapper.

Django's ``CursorWrapper`` costs tens of microseconds a statement, and the interpreter runs
it cold after each round trip. For the statements a single enqueue and a claim run, run()
keeps what Django does around a statement that matters here (the connection's health
check, the check for a broken transaction, Django's exceptions, the rollback mark inside
``atomic``) and runs it through libpq on PostgreSQL (libpq.py) or on the backend's own
cursor elsewhere.

Only where nothing else hooks the connection's cursors: a statement goes through
Django's cursor as before when something watches queries (``execute_wrapper()``, query
logging under ``DEBUG`` or ``assertNumQueries``), when the backend is not Django's own
(django-tenants sets the schema search path in its ``_cursor()``) or its cursor methods
were replaced (a test's ``_DatabaseFailure``, a ``connection_created`` receiver's hook),
when ``CursorWrapper.execute`` is patched or wrapped (Sentry), or when psycopg's cursors
are not Django's (an instrumented psycopg).
"""

from __future__ import annotations

import os
import re
import types
from typing import Any

import django
from django.db import transaction
from django.db.backends.utils import CursorWrapper

from . import libpq

#: Where Django's own backends are defined (the GIS ones subclass them, hooking nothing).
STOCK_BACKENDS = ("django.db.backends.", "django.contrib.gis.db.backends.")
#: Hand-written statements kept in the driver's form (libpq's, or SQLite's ``?``); beyond
#: this many the cache starts again.
MAX_STATEMENTS = 1024
_HOOKS = frozenset({"cursor", "_cursor", "create_cursor"})
_DJANGO_DIR = os.path.dirname(django.__file__) + os.sep
_stock_classes: dict[type, bool] = {}
_statements: dict[tuple[str, str], bytes | str] = {}  # by (vendor, SQL)
_FORMAT_PLACEHOLDER = re.compile(r"(?<!%)%s")


def run(
    connection,
    sql: str,
    params: list[Any],
    many: bool = False,
    without_sort: bool = False,
    prepare: bool = False,
):
    """Run `sql` (``%s`` placeholders) on `connection`: its first row (None if none); with
    `many`, (every row, the column names).

    With `without_sort` (PostgreSQL; ignored elsewhere), `sql` is planned with ``enable_sort``
    off, which leaves only the plans that read an index in the order asked for: see
    claims.claim_jobs().

    With `prepare` (PostgreSQL through libpq; ignored elsewhere), `sql` may be run as a
    prepared statement: see prepared.py.
    """
    without_sort = without_sort and connection.vendor == "postgresql"
    try:
        connection.close_if_health_check_failed()  # what connection.cursor() does first
        connection.ensure_connection()
        if not unhooked(connection):  # after connecting: connection_created's receivers ran
            if without_sort:
                return _run_without_sort(connection, sql, params, many)
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return _fetched(cursor, many)
        connection.validate_no_broken_transaction()
        with connection.wrap_database_errors:
            if connection.vendor == "postgresql" and libpq.usable(connection.connection):
                statement = pg_statement(sql)
                done = libpq.run(connection, statement, params, many, without_sort, prepare)
                if done is not None:
                    return done if many else (done[0] if done else None)
            if without_sort:
                return _run_without_sort(connection, sql, params, many)
            if connection.vendor == "sqlite":
                # The driver's own cursor, given the statement in its form (? placeholders)
                # made once: Django's converts it again on every call.
                cursor = connection.connection.cursor()
                sql = _qmark(sql)
            else:
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


def pg_statement(sql: str) -> bytes:
    """PostgreSQL: `sql` as libpq takes it (libpq.query()), made once."""
    statement = _statements.get(("postgresql", sql))
    if statement is None:
        if len(_statements) >= MAX_STATEMENTS:
            _statements.clear()
        statement = _statements["postgresql", sql] = libpq.query(sql)[0]
    return statement


def _qmark(sql: str) -> str:
    """SQLite: `sql` with ``?`` placeholders, as Django's SQLiteCursorWrapper converts it."""
    statement = _statements.get(("sqlite", sql))
    if statement is None:
        if len(_statements) >= MAX_STATEMENTS:
            _statements.clear()
        statement = _statements["sqlite", sql] = _FORMAT_PLACEHOLDER.sub("?", sql).replace("%%", "%")
    return statement


def _run_without_sort(connection, sql: str, params: list[Any], many: bool):
    """PostgreSQL through Django's cursor (something hooks it): `sql` with enable_sort off
    for it alone.

    In autocommit, with client-side binding (psycopg 3's default in Django, and psycopg 2)
    and no psycopg pipeline, the two statements go as one query, which runs them in one
    implicit transaction: one round trip, as libpq.run() takes (hooks on the cursor see
    that query; on psycopg 3 the cursor is moved to the second result). Otherwise
    (server-side binding, or inside the caller's transaction, whose setting is put back)
    one statement at a time. `sql` must return rows (a claim's RETURNING).
    """
    if connection.get_autocommit() and getattr(connection.connection, "_pipeline", None) is None:
        with connection.cursor() as cursor:
            if _client_side(cursor.cursor):
                cursor.execute(f"{libpq.SORT_OFF.decode()}; {sql}", params)
                if cursor.description is not None and cursor.description[0].name == "set_config":
                    cursor.nextset()  # psycopg 3 keeps every result; psycopg 2 only the last
                return _fetched(cursor, many)
    within = not connection.get_autocommit()
    with transaction.atomic(using=connection.alias, savepoint=False), connection.cursor() as cursor:
        cursor.execute((libpq.SORT_OFF_IN_TRANSACTION if within else libpq.SORT_OFF).decode())
        cursor.execute(sql, params)
        fetched = _fetched(cursor, many)
        if within:
            cursor.execute(libpq.SORT_BACK.decode())
    return fetched


def _client_side(cursor) -> bool:
    """Whether a PostgreSQL driver cursor merges parameters into the query (so one execute()
    may hold several statements): psycopg 3's ClientCursor, or any psycopg 2 cursor."""
    if type(cursor).__module__.startswith("psycopg2"):
        return True
    return libpq.psycopg is not None and isinstance(cursor, libpq.psycopg.ClientCursor)


def unhooked(connection) -> bool:
    """Whether run() may skip Django's cursor (see above): checked on every statement, but for
    what the wrapper's class and Django's CursorWrapper say, which is worked out once."""
    if connection.execute_wrappers or connection.queries_logged or _HOOKS & connection.__dict__.keys():
        return False
    stock = _stock_classes.get(type(connection))
    if stock is None:
        stock = _stock_classes[type(connection)] = _stock(type(connection))
    return stock and _django_function(CursorWrapper, "execute")


def _stock(wrapper_class) -> bool:
    """Whether `wrapper_class` is one of Django's own backends, its cursor methods Django's."""
    if not wrapper_class.__module__.startswith(STOCK_BACKENDS):
        return False
    return all(_django_function(wrapper_class, name, inherited=True) for name in _HOOKS)


def _django_function(owner: type, name: str, inherited: bool = False) -> bool:
    """Whether `owner.name` is a function of Django's own code, and so is every function it
    wraps (Django's @async_unsafe): not replaced, not wrapped by others (a patch made with
    functools.wraps() keeps the name and module of what it wraps, not its code)."""
    function = getattr(owner, name) if inherited else owner.__dict__.get(name)
    while function is not None:
        if type(function) is not types.FunctionType or not function.__code__.co_filename.startswith(
            _DJANGO_DIR
        ):
            return False
        function = getattr(function, "__wrapped__", None)
    return True


def _fetched(cursor, many: bool):
    if many:
        return cursor.fetchall(), [column[0] for column in cursor.description]
    return cursor.fetchone()
