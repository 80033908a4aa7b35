"""PostgreSQL: the worker's LISTEN connection, read by the thread that waits for work.

It is a connection of its own (``connections.create_connection()``: Django's settings,
OPTIONS and connection_created receivers, but not the thread's claim connection, which
an outage handler may close and open again), read without blocking: the waiting thread
polls its socket beside its wake-up event (worker/lifecycle/wake_event.py) and calls read() when it
is readable. A connection lost (the server restarted, a pooler or pg_terminate_backend
closed it) is opened again from the next wait, after a pause that doubles up to 30 s;
notifications sent meanwhile are lost, so each (re)connection counts as one. Its states
and every move between them are listen_states.py's (diagram: docs/worker.rst).

The worker's claims run on it too (worker/claiming/claimer.py) where its server session is
provably the worker's own: its alias, straight to PostgreSQL (listen_handshake.py), in
autocommit (prepared.session_kept()). That session plans without sorts (``enable_sort``
off, which the claim needs: db.claim_jobs()), so a claim is one statement, not two, sent to
the server process that has just sent the notification, which is running (0.2 to 0.3 ms
off an idle worker's wake-up). A notification psycopg takes while a claim runs on it is
counted by a handler for the next read().
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from django.db import connections

from .listen_handshake import HANDSHAKE_PREFIX, hears_own_notifies, reached_directly
from .listen_states import IllegalMove, ListenStates
from .triggers import QUEUE_TRIGGER_FIRES

logger = logging.getLogger("django_dbjobs")

CHANNEL = "dbjobs"
#: The NOTIFY payloads of a schedule saved or deleted, and of a queue paused or resumed
#: (db/triggers.py); a new job's is empty.
SCHEDULES_PAYLOAD = "schedules"
QUEUES_PAYLOAD = "queues"
#: libpq options the LISTEN connection gets unless the database's OPTIONS set them: the
#: thread that opens it is the worker's loop, which must not wait minutes on a host that
#: does not answer; and a connection a NAT or load balancer dropped without a word is
#: noticed within two minutes (then it is opened again) instead of never.
CONNECTION_DEFAULTS = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 60,
    "keepalives_interval": 15,
    "keepalives_count": 4,
}


class Heard(NamedTuple):
    """How many notifications of each kind a read took."""

    jobs: int = 0
    schedules: int = 0
    queues: int = 0


def _count(heard: list[int], payload: str) -> None:
    """Count a notification with `payload` in `heard` (as in Heard); a handshake's is none."""
    if not payload.startswith(HANDSHAKE_PREFIX):
        heard[1 if payload == SCHEDULES_PAYLOAD else 2 if payload == QUEUES_PAYLOAD else 0] += 1


class Listen:
    """A LISTEN connection to `using`, opened by connect() and read by read().

    Claims run on it only with `claims_allowed` (it is the worker's own alias). With
    `direct_only`, never through a pooler (a transaction pooler's LISTEN hears nothing):
    connect() finds one before LISTEN (reached_directly()), closes it and sets `pooled`.
    On another alias than `own` (the worker's; default `using`) or through a pooler, it
    proves it hears `own`'s notifications (listen_handshake.py), or closes and sets `unheard`.
    """

    def __init__(self, using: str, direct_only=False, claims_allowed=True, own: str | None = None):
        self.using = using
        self.own = own or using
        self.direct_only = direct_only
        #: A DBJOBS_LISTEN_DATABASE alias is trusted to hear, not to hold the same jobs.
        self.claims_allowed = claims_allowed
        self.connection = None  # the Django connection wrapper, while listening
        self.states = ListenStates()
        #: Notifications psycopg took while a claim ran on the connection, as in Heard.
        self._heard = [0, 0, 0]
        #: Whether the queue table's trigger fires (db/triggers.py), as read when it connected.
        self.hears_queues = False
        #: Whether connect() last reached PostgreSQL through a pooler (reached_directly()).
        self.pooled = False
        #: Whether a handshake found it deaf to `own`'s notifications (the caller waits another way).
        self.unheard = False

    @property
    def listening(self) -> bool:
        return self.states.listening

    @property
    def claims_here(self) -> bool:
        """Whether the worker claims on it: its session plans without sorts (see above)."""
        return self.states.claims_here

    @property
    def sessions(self) -> int:
        """How many times it started listening: tells one LISTEN session from the next."""
        return self.states.sessions

    def fileno(self) -> int:
        """The socket to poll for reading; only while listening."""
        return self.connection.connection.pgconn.socket

    def retry_in(self) -> float:
        """Seconds until connect() tries again (0: now)."""
        return self.states.retry_in()

    def connect(self) -> bool:
        """LISTEN, unless listening already or the pause since the last failure is not over.

        True when it just started listening: whatever was sent before is unknown to the
        caller, which must look for work as if notified. False through a pooler with
        `direct_only`, or deaf to `own` (`unheard`): see the class.
        """
        if not self.states.may_open():
            return False
        connection = None
        try:
            connection = connections.create_connection(self.using)
            settings = connection.settings_dict
            # Its own connection, never one of a pool (OPTIONS "pool"): a pool is made once per
            # alias, so these options would not reach it, and closing gives the socket back.
            options = {key: value for key, value in settings["OPTIONS"].items() if key != "pool"}
            connection.settings_dict = {**settings, "OPTIONS": {**CONNECTION_DEFAULTS, **options}}
            connection.ensure_connection()
            from . import prepared  # imports psycopg: installed where LISTEN is used

            with connection.cursor() as cursor:
                self.pooled = pooled = not reached_directly(connection, cursor)
            if pooled and self.direct_only:
                _close(connection)
                return False
            with connection.cursor() as cursor:
                cursor.execute(f"LISTEN {CHANNEL}")
                claims_here = (
                    self.claims_allowed
                    and not pooled
                    and prepared.session_kept(connection)
                    and connection.get_autocommit()
                )
                if claims_here:
                    cursor.execute("SET enable_sort = off")  # for the claims (see above)
                cursor.execute(QUEUE_TRIGGER_FIRES)
                (hears_queues,) = cursor.fetchone()
            self._heard = [0, 0, 0]  # the caller looks for work as if notified anyway
            if (pooled or self.using != self.own) and not hears_own_notifies(
                connection, self.own, CHANNEL, lambda payload: _count(self._heard, payload)
            ):
                if self.sessions:  # it heard before: a slow server, not a pooler; try again later
                    self._give_up(
                        None, TimeoutError("its own NOTIFY was not heard"), self.states.open_failed()
                    )
                    return False
                self.unheard = True  # UNLISTEN sent, and closed: never heard, the caller probes
                return False
            connection.connection.add_notify_handler(self._heard_during_query)
        except Exception as exc:  # noqa: BLE001 - a receiver or the server: try again later
            self._give_up(connection, exc, self.states.open_failed())
            return False
        self.connection, self.hears_queues = connection, hears_queues
        self.states.opened(own_session=claims_here)
        return True

    @property
    def queue_session(self) -> int | None:
        """The LISTEN session open now (a number no other session of this worker has), if it
        hears of every queue paused or resumed (the queue trigger of triggers.py fires); else None."""
        return self.sessions if self.connection is not None and self.hears_queues else None

    def read(self) -> Heard:
        """Take what arrived without waiting: how many notifications of each kind (Heard).

        A lost connection is closed and logged (connect() opens it again later), and
        reads as none.
        """
        connection = self.connection
        if connection is None:
            return Heard()
        from psycopg import pq  # psycopg is installed where LISTEN is used (db.supports_listen())

        heard, self._heard = self._heard, [0, 0, 0]
        try:
            # Some psycopg releases (3.2.4 to 3.2.8) keep every notification they take in a
            # backlog even with a handler: read through it, it would grow for the worker's life.
            backlog = getattr(connection.connection, "_notifies_backlog", None)
            if backlog:
                backlog.clear()
            pgconn = connection.connection.pgconn
            pgconn.consume_input()
            if pgconn.status == pq.ConnStatus.BAD:  # closed without an error: poll() would spin
                raise ConnectionError("the server closed the connection")
            while (notification := pgconn.notifies()) is not None:
                _count(heard, notification.extra.decode(errors="replace"))
        except Exception as exc:  # noqa: BLE001 - psycopg's OperationalError, or any: reconnect
            self.lost(exc)
        return Heard(*heard)

    def failed(self, connection, exc: Exception) -> bool:
        """A claim on `connection` (this LISTEN connection) raised `exc`: if the connection
        broke, or is left with a statement whose results nobody will read (an error while
        reading them), close it (connect() opens another after a pause) and return True;
        else False (the error is the statement's)."""
        from psycopg import pq

        raw = connection.connection
        sound = (
            raw is not None
            and not raw.closed
            and raw.pgconn.status == pq.ConnStatus.OK
            and raw.pgconn.transaction_status == pq.TransactionStatus.IDLE  # in autocommit
        )
        if sound:
            return False
        self._give_up(connection, exc, self.states.claim_broke())
        return True

    def _heard_during_query(self, notification) -> None:
        """psycopg took `notification` while reading a claim's results: keep it for read()."""
        _count(self._heard, notification.payload)

    def close(self) -> None:
        connection, self.connection = self.connection, None
        self.states.closed()
        if connection is not None:
            _close(connection)

    def lost(self, exc: Exception) -> None:
        """The open connection failed with `exc` (a read, a poll): close it; connect() opens
        another after a pause."""
        try:
            pause = self.states.lost()
        except IllegalMove:  # a path the diagram lacks: a bug, but never the worker's end
            logger.exception("LISTEN connection lost in an unexpected state; opening another")
            self.close()  # CLOSED: connect() opens another at once
            return
        self._give_up(self.connection, exc, pause)

    def _give_up(self, connection, exc: Exception, pause: float) -> None:
        """Close `connection`, which failed with `exc`; connect() tries again in `pause` seconds."""
        if connection is self.connection:
            self.connection = None
        logger.warning("LISTEN connection lost, reconnecting in %.1fs: %s", pause, exc)
        if connection is not None:
            _close(connection)


def _close(connection) -> None:
    """Close the socket, with no round trip: the session, and its LISTEN, end with it (a
    query on a connection dropped without a word could wait minutes, at shutdown too)."""
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - it is gone either way
        logger.debug("Closing the LISTEN connection failed", exc_info=True)
