"""PostgreSQL: the claim and the INSERTs of enqueue() and enqueue_many() as prepared statements.

Sent as a plain statement, the INSERT is parsed and planned by the server on every
enqueue: 70 to 120 µs of a single enqueue's 450 to 570 (measured here, PostgreSQL 15,
2 cores), more than the Python around it costs. The claim was parsed and planned cold after every
idle wait: prepared, an idle worker's claim round trip measured 0.4 to 0.5 ms shorter
(of about 1.5). Prepared once per connection, each then sends only its values. With
libpq 14 or later (pipeline mode; psycopg's binary wheels bundle a recent libpq) the
first run on a connection is prepared and run in one pipeline, one round trip, as the
plain statement takes, so a web request on a new connection (``CONN_MAX_AGE = 0``) pays
nothing for it; a Sync between the PREPARE and the run lets the run go ahead when the
server session had the statement already (42P05, a pooled server connection). Before
libpq 14 the INSERT's PREPARE takes a round trip of its own, once per connection, and
the claim (which needs a pipeline for its planner setting) is not prepared.

``DBJOBS_PREPARED_STATEMENTS`` (default True) turns this on; ``False``, or Django's
``DISABLE_SERVER_SIDE_CURSORS`` (the setting Django documents for transaction pooling),
turns it off. psycopg's ``prepare_threshold`` (Django sets it to None unless OPTIONS
gives it) is psycopg's own preparing of Django's queries, and plays no part here. Only
where it cannot cost the caller anything:

- In autocommit only. A prepared statement can go missing from the session (a
  ``DISCARD ALL`` or ``DEALLOCATE``, psycopg's own ``DEALLOCATE ALL`` after a rollback
  when it prepares queries itself, a pooler in transaction mode sending each transaction
  to another server connection): the statement then fails before it runs, and in
  autocommit it is simply sent again unprepared. Inside the caller's transaction the
  failure would abort the transaction, so there the statement is never prepared.
- Text and integer values only (not a datetime ``run_at``): the prepared statement's
  parameter types are what the statement's context gives them, as for the plain one.
- A connection stops preparing when a statement goes missing right after it was
  prepared (a transaction pooler moving the session at the Sync after the PREPARE),
  when statements keep going missing (a pooler between us and the server:
  MAX_LOSSES of them with fewer than RECOVERY successful runs between), when the table
  changed under a prepared statement (a migration), or when the server or a pooler
  refuses PREPARE itself (REFUSED). Otherwise a lost statement is prepared again on its
  next run, and a PREPARE that fails otherwise (a lock timeout) just leaves this one
  run unprepared.

The name is made from the statement's text, so the same statement has the same name in
every process: a session that already has it (a pooled connection handed to a new
Django connection; a pooler's server connection prepared by another client) reuses it.
"""

from __future__ import annotations

import hashlib
import logging
import weakref

from psycopg import generators, pq

from ..conf import settings

#: Among the commands given to libpq._pipelined(): a Sync there, ending a transaction.
SYNC = None

logger = logging.getLogger("django_dbjobs")

#: Per psycopg connection: its prepared statements (statement -> name), None once it
#: prepares no more; and its losses not yet forgiven, in runs (RECOVERY per loss, one less
#: per successful run). Weak keys: the values do not refer to it.
_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_losses: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: At most this many statements prepared per connection (enqueue() has a few shapes).
MAX_PREPARED = 64
#: After this many prepared statements went missing, a connection prepares no more; each
#: RECOVERY successful runs of a prepared statement forgive one loss.
MAX_LOSSES = 3
RECOVERY = 100
#: The statement is gone from the session (invalid_sql_statement_name): nothing ran.
GONE = "26000"
#: The table changed so that the prepared statement no longer fits it (feature_not_supported:
#: "cached plan must not change result type", after a migration): nothing ran.
STALE = "0A000"
#: A statement of that name is already prepared in this session: by construction, this one.
DUPLICATE = "42P05"
#: PREPARE itself is refused (feature_not_supported, protocol_violation): not asked again.
REFUSED = frozenset({"0A000", "08P01"})


def allowed(connection, raw) -> bool:
    """Whether statements may be prepared on Django's `connection` (its psycopg `raw`): see above."""
    return session_kept(connection) and _names.get(raw, ()) is not None


def session_kept(connection) -> bool:
    """Whether state left in `connection`'s server session is taken to stay there and stay
    its own: not with ``DISABLE_SERVER_SIDE_CURSORS`` (a transaction pooler), nor with
    ``DBJOBS_PREPARED_STATEMENTS`` False. Prepared statements need it, and so does the
    planner setting of the LISTEN connection's session (listen.py)."""
    return settings.PREPARED_STATEMENTS is True and not connection.settings_dict.get(
        "DISABLE_SERVER_SIDE_CURSORS"
    )


def execute_pipelined(raw, pipelined, first: bytes | None, statement: bytes, values: list[bytes]):
    """`first` (no parameters; None: nothing), then `statement` with `values` as a prepared
    statement (prepared first if needed), in one pipeline, one round trip (``pipelined``:
    libpq._pipelined): ([first's result, if any, then the statement's], None), or
    (None, why) as execute() says.

    In autocommit `first` and the statement are one implicit transaction: when the statement
    fails before it runs (not prepared here, gone), `first` is rolled back with it and
    nothing ran. A PREPARE goes before them, in a transaction of its own (a Sync between):
    when the session has the statement already (42P05: a pooled server connection that
    another client prepared it on), the run after it still goes ahead, in the same round
    trip.
    """
    names = _names.get(raw)
    if names is None:
        names = _names[raw] = {}
    name = names.get(statement)
    fresh = name is None
    sends = []
    if first is not None:

        def send_first(pgconn) -> None:
            pgconn.send_query_params(first, None)

        sends.append(send_first)

    def run(pgconn) -> None:
        pgconn.send_query_prepared(name, values)

    sends.append(run)
    if fresh:
        if len(names) >= MAX_PREPARED:
            return None, None
        name = _name(statement)

        def prepare(pgconn) -> None:
            pgconn.send_prepare(name, statement)

        made, *results = pipelined(raw, [prepare, SYNC, *sends])
        failed = _not_made(raw, made)
        if failed:  # not in the session, so the run after it failed too: nothing ran
            return failed
        names[statement] = name
    else:
        results = pipelined(raw, sends)
    ran, why = _counted(raw, names, results[-1], fresh)
    return (results, None) if ran else (None, why)


def execute(raw, statement: bytes, values: list[bytes], pipelined=None) -> tuple[list | None, str | None]:
    """Run `statement` (libpq's form) with `values` (text) as a prepared statement on `raw`,
    preparing it first if needed (with `pipelined`, libpq._pipelined, in the same round
    trip): (its results, None).

    (None, why) when nothing ran: it is not prepared and may not be, or it could not be
    prepared, or its prepared form went missing; the caller then sends it as usual, and
    logs `why` if it is not None (after letting go of ``raw.lock``, which the caller holds
    here). `raw` is in autocommit, idle, and allowed().
    """
    names = _names.get(raw)
    if pipelined is not None and not (names and statement in names):  # to prepare first
        return execute_pipelined(raw, pipelined, None, statement, values)
    if names is None:
        names = _names[raw] = {}
    name = names.get(statement)
    pgconn = raw.pgconn
    fresh = name is None
    if fresh:
        if len(names) >= MAX_PREPARED:
            return None, None
        name = _name(statement)
        pgconn.send_prepare(name, statement)
        (made,) = raw.wait(generators.execute(pgconn))
        failed = _not_made(raw, made)
        if failed:
            return failed
        names[statement] = name
    pgconn.send_query_prepared(name, values)
    results = raw.wait(generators.execute(pgconn))
    ran, why = _counted(raw, names, results[-1], fresh)
    return (results, None) if ran else (None, why)


def _not_made(raw, result) -> tuple[None, str | None] | None:
    """None if a PREPARE's `result` says the statement is in the session (made, or there
    already: DUPLICATE); else (None, why) for the caller, which sends the statement plain: it
    will say what is wrong if it is wrong (a missing table). A server or pooler that refuses
    to prepare is not asked again."""
    if result.status == pq.ExecStatus.COMMAND_OK:
        return None
    state = _sqlstate(result)
    if state == DUPLICATE:
        return None
    if state in REFUSED:
        _names[raw] = None
        return None, f"PREPARE was refused ({state})"
    return None, None


def _name(statement: bytes) -> bytes:
    return b"dbjobs_" + hashlib.sha256(statement).hexdigest()[:32].encode()


def _counted(raw, names: dict, result, fresh: bool) -> tuple[bool, str | None]:
    """After running a prepared statement: (True, None) if it ran (its error, if any, is the
    caller's to raise); (False, why) if it did not (gone or stale): the caller sends it
    plain, and logs `why` (not None: this connection prepares no more)."""
    state = _sqlstate(result) if result.status == pq.ExecStatus.FATAL_ERROR else ""
    if state not in (GONE, STALE):
        if raw in _losses:  # forgiven, a little with each run
            _losses[raw] -= 1
            if _losses[raw] <= 0:
                del _losses[raw]
        return True, None
    debt = _losses[raw] = _losses.get(raw, 0) + RECOVERY
    losses = -(-debt // RECOVERY)  # the losses not yet forgiven, this one included
    if state == STALE or fresh or losses >= MAX_LOSSES:
        _names[raw] = None
        return False, f"a prepared statement went missing or stale ({state}, {losses} so far)"
    names.clear()  # gone from the session (DISCARD ALL, psycopg's DEALLOCATE ALL): prepare again
    return False, None


def _sqlstate(result) -> str:
    return (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
