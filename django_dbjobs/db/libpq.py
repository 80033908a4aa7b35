"""PostgreSQL: one statement sent straight through libpq (enqueue()'s INSERT, the claim).

psycopg's cursor spends about 90 microseconds of Python on each statement (measured
here, cold, between two round trips): making the cursor, converting the query, deciding
on preparation, waiting, wrapping the result. For the one INSERT a single enqueue runs,
that was more than the database's own work; for an idle worker's claim, a tenth of its
wake-up. run() does only what that statement needs,
with psycopg's own parts: its Transformer to turn the parameters into PostgreSQL's text
and the row back into Python (the connection's adapters, Django's time zone loader
included), its generator to send and fetch without blocking, and ``Connection.wait()``,
which also cancels the statement on Ctrl-C. Errors come back as psycopg's errors, which
the caller's ``wrap_database_errors`` turns into Django's.

run() returns None, having sent nothing, whenever psycopg's cursor must do the work:
pipeline mode, a transaction psycopg has still to BEGIN, a time zone loader Django
would change for the cursor, or a psycopg without these parts.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

try:
    from psycopg import adapt, errors, generators, pq
    from psycopg.adapt import PyFormat
    from psycopg.postgres import types as pg_types
except ImportError:  # psycopg 2, or a psycopg without them: the cursor does it all
    adapt = None

_PLACEHOLDER = re.compile(r"%(%|s)")
#: Per psycopg connection: its Transformer, whether it speaks UTF-8, its time zone loader.
_connections: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def query(sql: str) -> tuple[bytes, int]:
    """A statement written with ``%s`` placeholders (and ``%%``) as libpq takes it: ``$1``, ...; and
    how many parameters it has."""
    count = 0

    def number(match: re.Match) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%"
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, sql).encode(), count


def run(connection, statement: bytes, params: list[Any], many: bool = False):
    """Run `statement` (made by query()) on Django's PostgreSQL `connection`; return its rows
    (a list, empty if none) and, with `many`, the column names with them.

    The connection must be open (``ensure_connection()``). None: not run, use a cursor.
    """
    if adapt is None:
        return None
    raw = connection.connection
    pgconn = raw.pgconn
    status = pgconn.transaction_status
    if raw._pipeline is not None or not (
        status == pq.TransactionStatus.INTRANS or (status == pq.TransactionStatus.IDLE and raw.autocommit)
    ):
        return None
    known = _connections.get(raw)
    if known is None:
        loader = raw.adapters.get_loader(pg_types["timestamptz"].oid, pq.Format.TEXT)
        known = _connections[raw] = (adapt.Transformer(raw), raw.info.encoding == "utf-8", loader)
    transformer, utf8, loader = known
    if getattr(loader, "timezone", None) != connection.timezone:
        return None  # Django registers its loader on each cursor then (TIME_ZONE changed)
    for param in params:
        if type(param) is not str or "\x00" in param or not utf8:
            if type(param) is int and utf8:  # an integer, as text of unknown type
                continue
            values = transformer.dump_sequence(params, [PyFormat.AUTO] * len(params))
            types, formats = transformer.types, transformer.formats
            break
    else:  # text of unknown type, as psycopg sends a str: the SQL casts it where needed
        values, types, formats = [str(param).encode() for param in params], None, None
    with raw.lock:
        pgconn.send_query_params(statement, values, param_types=types, param_formats=formats)
        results = raw.wait(generators.execute(pgconn))
    result = results[-1]
    if result.status != pq.ExecStatus.TUPLES_OK:
        raise errors.error_from_result(result, encoding=raw.info.encoding)
    transformer.set_pgresult(result)
    try:
        rows = transformer.load_rows(0, result.ntuples, tuple) if result.ntuples else []
    finally:
        transformer.set_pgresult(None)
    if many:
        return rows, [result.fname(n).decode() for n in range(result.nfields)]
    return rows
