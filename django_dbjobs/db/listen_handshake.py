"""PostgreSQL: how a worker knows its LISTEN connection hears its own database's NOTIFYs.

Straight to PostgreSQL on the worker's own alias, it does by construction
(reached_directly()). On another alias (``DBJOBS_LISTEN_DATABASE``) or through a pooler it
must prove it: a transaction pooler hands the LISTEN session's server connection to other
clients (they get our notifications, we hear nothing), and another alias may reach another
database. The proof is a handshake: the worker sends a NOTIFY with a random token from its
own connection and must hear exactly that payload on the LISTEN connection within
HANDSHAKE_TIMEOUT seconds. Other workers ignore handshake payloads (listen._kind()); older
releases count one as a job, which costs them one empty claim.
"""

from __future__ import annotations

import secrets
import selectors
import time
from collections.abc import Callable

from django.db import connections

#: The start of a handshake's NOTIFY payload; a random token follows.
HANDSHAKE_PREFIX = "handshake:"
#: Seconds a handshake waits for its own NOTIFY: one crosses a server in milliseconds.
HANDSHAKE_TIMEOUT = 2.0


def reached_directly(connection, cursor) -> bool:
    """Whether `connection` (in `cursor`) reaches PostgreSQL itself, not a pooler: the server
    process it met at connecting (libpq's backend pid) is the one running its statements.
    A pooler (PgBouncer) answers the connection with a process number of its own, and a
    transaction pooler hands each statement to any server connection."""
    cursor.execute("SELECT pg_backend_pid()")
    (pid,) = cursor.fetchone()
    return pid == connection.connection.pgconn.backend_pid


def hears_own_notifies(
    connection, own: str, channel: str, other: Callable[[str], None], timeout: float = HANDSHAKE_TIMEOUT
) -> bool:
    """Whether `connection`, listening on `channel`, hears a NOTIFY sent from alias `own`.

    It is sent on the worker's own connection (``connections[own]``, in autocommit: outside
    a transaction, so it is delivered at once); every other payload read meanwhile is passed
    to `other`, so no notification is lost. If it is not heard, `connection` is closed after
    ``UNLISTEN *`` (through a transaction pooler that reaches whichever server connection
    the pooler picks: the one that ran LISTEN, handed to other clients, may keep listening
    until the pooler closes it). A database error propagates (an outage, not a proof either way).
    """
    from psycopg import pq  # installed where LISTEN is used

    sender = connections[own]
    if sender.in_atomic_block:  # the NOTIFY would wait for the commit
        raise RuntimeError(f"the handshake's NOTIFY cannot be sent inside a transaction on {own!r}")
    token = HANDSHAKE_PREFIX + secrets.token_hex(8)
    with sender.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [channel, token])
    if not sender.get_autocommit():  # AUTOCOMMIT False in its settings: delivered on commit
        sender.commit()
    pgconn = connection.connection.pgconn
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:  # poll() or epoll: any descriptor number
        selector.register(pgconn.socket, selectors.EVENT_READ)
        while True:
            pgconn.consume_input()
            while (notification := pgconn.notifies()) is not None:
                payload = notification.extra.decode(errors="replace")
                if payload == token:
                    return True
                other(payload)
            if pgconn.status == pq.ConnStatus.BAD:
                raise ConnectionError("the server closed the connection")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            selector.select(remaining)
    with connection.cursor() as cursor:
        cursor.execute("UNLISTEN *")
    connection.close()
    return False
