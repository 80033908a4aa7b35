"""PostgreSQL: one statement sent straight through libpq (enqueue()'s INSERT, the claim).

psycopg's cursor spends about 90 microseconds of Python on each statement (measured
here, cold, between two round trips): making the cursor, converting the query, deciding
on preparation, waiting, wrapping the result. For the one INSERT a single enqueue runs,
that was more than the database's own work; for an idle worker's claim, a tenth of its
wake-up. run() does only what such a statement needs, with psycopg's own parts: its
Transformer to turn the row back into Python (the connection's adapters, Django's time
zone loader included) and any parameter that is not text into PostgreSQL's, its
generator to send and fetch without blocking, and ``Connection.wait()``, which also
cancels the statement on Ctrl-C. Errors come back as psycopg's errors, which the
caller's ``wrap_database_errors`` turns into Django's (direct.py).

Text and integer parameters go as text of unknown type, as psycopg sends a str, so the
statement's context types them: write a cast where that is not enough (``%s::jsonb``).

run() returns None, having sent nothing, whenever psycopg's cursor must do the work:
pipeline mode, a transaction psycopg has still to BEGIN, a time zone loader Django would
change for the cursor, or a psycopg without these parts (for ``without_sort``, a libpq
without pipeline mode: before 14).
"""

from __future__ import annotations

import logging
import re
from typing import Any

try:
    import psycopg
    from psycopg import adapt, generators, pq
    from psycopg.adapt import PyFormat
    from psycopg.postgres import types as pg_types

    from . import pg_rows, prepared
except ImportError:  # psycopg 2, or a psycopg without them: the cursor does it all
    psycopg = None

logger = logging.getLogger("django_dbjobs")
_PLACEHOLDER = re.compile(r"%(%|s)")
#: What run() keeps per psycopg connection, on Django's wrapper (never in a module-level
#: mapping: the Transformer refers to the connection, so a weak key would never go).
_STATE = "_dbjobs_libpq"


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


def usable(raw: Any) -> bool:
    """Whether run() may take `raw`, Django's psycopg connection: a plain psycopg 3 connection
    whose cursors are Django's own (no instrumentation wrapping them)."""
    if psycopg is None or type(raw) is not psycopg.Connection:
        return False
    factory = getattr(raw, "cursor_factory", None)
    return getattr(factory, "__module__", "").startswith(DJANGO_CURSORS)


#: enable_sort off until the end of the transaction: in autocommit, the pipeline's own
#: (implicit) transaction, so a single statement's planning and nothing else.
SORT_OFF = b"SELECT set_config('enable_sort', 'off', true)"
#: The same inside the caller's transaction, keeping its setting to put back (SORT_BACK).
SORT_OFF_IN_TRANSACTION = (
    b"SELECT set_config('dbjobs.enable_sort', current_setting('enable_sort'), true),"
    b" set_config('enable_sort', 'off', true)"
)
SORT_BACK = b"SELECT set_config('enable_sort', current_setting('dbjobs.enable_sort'), true)"


def _pipelines() -> bool:
    """Whether this psycopg and its libpq (14 or later) have pipeline mode."""
    global _PIPELINES
    if _PIPELINES is None:
        _PIPELINES = hasattr(generators, "fetch_many") and psycopg.Pipeline.is_supported()
    return _PIPELINES


_PIPELINES: bool | None = None


def _send(statement: bytes, values=None, types=None, formats=None):
    """A command for _pipelined(): `statement` with its parameters, unprepared."""

    def send(pgconn) -> None:
        pgconn.send_query_params(statement, values, param_types=types, param_formats=formats)

    return send


def _pipelined(raw, sends: list) -> list:
    """Send each command (a function sending one statement on the PGconn: _send(), or a
    prepared statement's) in one pipeline ending in a Sync, and return their results. One
    round trip; in autocommit, one implicit transaction that commits at the Sync, or rolls
    back there if a statement failed (those after it are skipped). A SYNC among the
    commands (prepared.SYNC) ends a transaction there: an error before it skips nothing
    after it."""
    pgconn = raw.pgconn
    pgconn.enter_pipeline_mode()
    try:
        syncs = 1
        for send in sends:
            if send is prepared.SYNC:
                pgconn.pipeline_sync()
                syncs += 1
            else:
                send(pgconn)
        pgconn.pipeline_sync()
        raw.wait(generators.send(pgconn))
        # Then wait to read, never to write: psycopg's pipeline_communicate() waits for
        # either, and a socket is nearly always writable, so it spun on the CPU until the
        # answer came (the commit's flush): a millisecond more per claim on a busy host.
        results: list = []
        while syncs:
            for result in raw.wait(generators.fetch_many(pgconn)):
                if result.status == pq.ExecStatus.PIPELINE_SYNC:
                    syncs -= 1
                else:
                    results.append(result)
    finally:
        try:
            pgconn.exit_pipeline_mode()
        except psycopg.Error as exc:  # interrupted with results unread: the connection is unusable
            logger.warning("Closing a PostgreSQL connection left in pipeline mode: %s", exc)
            pgconn.finish()
    return results


#: Where Django's psycopg cursor classes are defined.
DJANGO_CURSORS = "django.db.backends.postgresql."


def run(
    connection,
    statement: bytes,
    params: list[Any],
    many: bool = False,
    without_sort: bool = False,
    prepare: bool = False,
):
    """Run `statement` (made by query()) on Django's PostgreSQL `connection`; return its rows
    (a list, empty if none) and, with `many`, the column names with them.

    With `prepare`, the statement is run as a prepared statement where prepared.allowed()
    allows it (in autocommit, text and integer values only): enqueue()'s INSERT, the claim.

    With `without_sort`, the statement is planned with ``enable_sort`` off: in one pipeline
    (one round trip) after a statement that turns it off for the transaction only, and,
    inside the caller's transaction, before one that puts it back.

    The connection must be open (``ensure_connection()``). None: not run, use a cursor.
    """
    raw = connection.connection
    pgconn = raw.pgconn
    status = pgconn.transaction_status
    if raw._pipeline is not None or not (
        status == pq.TransactionStatus.INTRANS or (status == pq.TransactionStatus.IDLE and raw.autocommit)
    ):
        return None
    if without_sort and not _pipelines():
        return None
    transformer = transformer_for(connection, raw)
    if transformer is None:
        return None
    values = text_values(params)
    if values is None:
        values = transformer.dump_sequence(params, [PyFormat.AUTO] * len(params))
        types, formats = transformer.types, transformer.formats
    else:
        types, formats = None, None
    lost = None  # why this connection stopped preparing statements, if it just did
    with raw.lock:
        if without_sort:
            within = status == pq.TransactionStatus.INTRANS
            results = None
            if prepare and not within and types is None and prepared.allowed(connection, raw):
                results, lost = prepared.execute_pipelined(raw, _pipelined, SORT_OFF, statement, values)
            if results is None:
                results = _pipelined(
                    raw,
                    [_send(SORT_OFF_IN_TRANSACTION if within else SORT_OFF)]
                    + [_send(statement, values, types, formats)]
                    + ([_send(SORT_BACK)] if within else []),
                )
        else:
            results = None
            if prepare and types is None and status == pq.TransactionStatus.IDLE:
                if prepared.allowed(connection, raw):
                    results, lost = prepared.execute(
                        raw, statement, values, _pipelined if _pipelines() else None
                    )
            if results is None:
                pgconn.send_query_params(statement, values, param_types=types, param_formats=formats)
                results = raw.wait(generators.execute(pgconn))
    if lost:
        logger.info("django-dbjobs prepares no more statements on a PostgreSQL connection: %s", lost)
    return pg_rows.rows_of(results, 1 if without_sort else -1, transformer, statement if many else None)


def transformer_for(connection, raw):
    """The psycopg Transformer run() loads rows with on Django's `connection` (its psycopg
    `raw`), made once per psycopg connection; None where Django's cursor must do the work:
    its time zone loader would change for the cursor, or the client encoding is not UTF-8."""
    state = getattr(connection, _STATE, None)
    if state is None or state[0] is not raw:
        loader = raw.adapters.get_loader(pg_types["timestamptz"].oid, pq.Format.TEXT)
        state = (raw, adapt.Transformer(raw), loader)
        setattr(connection, _STATE, state)
    if getattr(state[2], "timezone", None) != connection.timezone:
        return None  # Django registers its loader on each cursor then (TIME_ZONE changed)
    if raw.pgconn.parameter_status(b"client_encoding") != b"UTF8":
        return None
    return state[1]


def text_values(params: list[Any]) -> list[bytes] | None:
    """`params` as libpq's text values, if each is an int or a str (without NUL); else None."""
    for param in params:
        kind = type(param)
        if not (kind is int or (kind is str and "\x00" not in param)):
            return None
    return [str(param).encode() for param in params]
