"""PostgreSQL: enqueue()'s INSERT as a prepared statement, in autocommit.

Sent as a plain statement, the INSERT is parsed and planned by the server on every
enqueue: 60 to 90 µs of a single enqueue's 450 (measured here, PostgreSQL 15, 2 cores),
about what the Python around it costs. Prepared once per connection, each enqueue
sends only its values.

Only where it cannot cost the caller anything:

- In autocommit only. A prepared statement can go missing from the session (a
  ``DISCARD ALL`` or ``DEALLOCATE``, or a pooler in transaction mode that sends each
  transaction to another server connection): the statement then fails before it runs,
  and in autocommit it is simply sent again unprepared. Inside the caller's transaction
  the failure would abort the transaction, so there the statement is never prepared.
- Not where the settings say the connection goes through such a pooler: psycopg's own
  switch (``"prepare_threshold": None`` in the database's ``OPTIONS``, the setting
  psycopg documents for PgBouncer) or Django's (``DISABLE_SERVER_SIDE_CURSORS``).
- Once a prepared statement went missing on a connection, that connection prepares none
  again.

The name is made from the statement's text, so the same statement has the same name in
every process: a session that already has it (a pooled connection handed to a new
Django connection; a pooler's server connection prepared by another client) reuses it.
"""

from __future__ import annotations

import hashlib
import logging
import weakref

from psycopg import errors, generators, pq

logger = logging.getLogger("django_dbjobs")

#: Statements prepared per psycopg connection (statement -> name); None once one went
#: missing there. Weak keys: the names do not refer to the connection.
_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: At most this many statements prepared per connection (enqueue() has a few shapes).
MAX_PREPARED = 64
#: The execution failed because the prepared statement is gone (invalid_sql_statement_name)
#: or no longer fits the table (feature_not_supported: "cached plan must not change result
#: type", after a migration): nothing ran.
GONE = frozenset({"26000", "0A000"})
#: A statement of that name is already prepared in this session: by construction, this one.
DUPLICATE = "42P05"


def allowed(connection, raw) -> bool:
    """Whether statements may be prepared on Django's `connection` (its psycopg `raw`), in
    autocommit with nothing pending: see above."""
    return (
        raw.prepare_threshold is not None
        and not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
        and _names.get(raw, ()) is not None
    )


def execute(raw, statement: bytes, values: list) -> list | None:
    """Run `statement` (libpq's form) with `values` (text, or None) as a prepared statement
    on `raw`, preparing it first if needed; its results. None, having run nothing, when it
    is not prepared and may not be, or when its prepared form went missing: then the caller
    sends it as usual. The caller holds ``raw.lock``; `raw` is in autocommit, idle."""
    names = _names.get(raw)
    if names is None:
        names = _names[raw] = {}
    name = names.get(statement)
    pgconn = raw.pgconn
    if name is None:
        if len(names) >= MAX_PREPARED:
            return None
        name = b"dbjobs_" + hashlib.sha256(statement).hexdigest()[:32].encode()
        pgconn.send_prepare(name, statement)
        (result,) = raw.wait(generators.execute(pgconn))
        if result.status != pq.ExecStatus.COMMAND_OK and _sqlstate(result) != DUPLICATE:
            raise errors.error_from_result(result, encoding="utf-8")
        names[statement] = name
    pgconn.send_query_prepared(name, values)
    results = raw.wait(generators.execute(pgconn))
    if results[-1].status == pq.ExecStatus.FATAL_ERROR and _sqlstate(results[-1]) in GONE:
        _names[raw] = None
        logger.info(
            "A prepared statement went missing on a PostgreSQL connection (%s); enqueue() "
            "prepares none on it again",
            _sqlstate(results[-1]),
        )
        return None
    return results


def _sqlstate(result) -> str:
    return (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
