"""PostgreSQL: a prepared statement sent at once, its results read later (an idle worker's claim).

A notified worker used to read the notification, go back through its loop, build its
claim and only then send it: 0.25 to 0.3 ms of Python, cold after the wait, before the
statement left, of a wake-up of about 1.3 (2 cores, PostgreSQL 15). Now the claim is made
ready before the wait (ready()), sent the moment a notification is read (Ready.send()),
and its results are read where the loop claims (Sent.finish()): that Python runs while
the statement travels and the server runs it.

Only a statement already prepared on the connection (prepared.py), in autocommit, with
text and integer values, where run() in direct.py would take the same path (Django's
cursor unhooked, psycopg 3 with its generators): elsewhere ready() returns None and the
caller runs the statement as usual. Once sent, the statement's results must be read
(finish()) before anything else runs on its connection.
"""

from __future__ import annotations

import logging

from django.db import InterfaceError

from . import direct, libpq

try:
    from psycopg import generators, pq

    from . import pg_rows, prepared
except ImportError:  # no psycopg 3: ready() says so
    generators = None

logger = logging.getLogger("django_dbjobs")


class NoAnswer(InterfaceError):
    """A statement sent ahead got no answer: its connection cannot be trusted any more."""


class Ready:
    """A prepared statement with its values, checked and encoded, to send on `connection`."""

    __slots__ = ("connection", "raw", "statement", "name", "values", "transformer")

    def __init__(self, connection, raw, statement: bytes, name: bytes, values: list[bytes], transformer):
        self.connection = connection
        self.raw = raw
        self.statement = statement
        self.name = name
        self.values = values
        self.transformer = transformer

    def send(self) -> Sent:
        """Send it without waiting for its results. Raises Django's error if the connection
        fails (the statement may have reached the server all the same)."""
        raw = self.raw
        with self.connection.wrap_database_errors, raw.lock:
            pgconn = raw.pgconn
            pgconn.send_query_prepared(self.name, self.values)
            if pgconn.flush():  # not all of it written yet: wait until it is
                raw.wait(generators.send(pgconn))
        return Sent(self)


class Sent:
    """A statement sent by Ready.send(), its results not read yet."""

    __slots__ = ("ready",)

    def __init__(self, ready: Ready):
        self.ready = ready

    @property
    def connection(self):
        return self.ready.connection

    def finish(self):
        """Wait for the results: (rows, column names), as direct.run(many=True) returns them;
        None if the statement did not run (its prepared form had gone from the session: run
        it as usual). Raises Django's error if it failed."""
        ready = self.ready
        raw = ready.raw
        with ready.connection.wrap_database_errors:
            with raw.lock:
                results = raw.wait(generators.fetch_many(raw.pgconn))
            if not results:  # it may have committed: the connection is given up (listen.py)
                raise NoAnswer("No answer to a claim sent ahead.")
            ran, why = prepared.counted(raw, results[-1])
            if not ran:
                if why:
                    logger.info("django-dbjobs prepares no more statements on a connection: %s", why)
                return None
            return pg_rows.rows_of(results, -1, ready.transformer, ready.statement)


def ready(connection, sql: str, params: list) -> Ready | None:
    """`sql` (``%s`` placeholders) with `params`, ready to send on Django's PostgreSQL
    `connection` (see above); None where it must run through direct.run()."""
    if connection.vendor != "postgresql" or generators is None or not hasattr(generators, "fetch_many"):
        return None
    connection.close_if_health_check_failed()
    raw = connection.connection
    if raw is None or raw.closed or not libpq.usable(raw) or not direct.unhooked(connection):
        return None
    if raw._pipeline is not None or not raw.autocommit:
        return None
    if raw.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return None
    if not prepared.allowed(connection, raw):
        return None
    values = libpq.text_values(params)
    transformer = libpq.transformer_for(connection, raw)
    if values is None or transformer is None:
        return None
    statement = direct.pg_statement(sql)
    name = prepared.name_of(raw, statement)
    if name is None:
        return None  # prepared by its first run through direct.run()
    return Ready(connection, raw, statement, name, values, transformer)
