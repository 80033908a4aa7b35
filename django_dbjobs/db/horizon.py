"""What keeps dead rows from being cleaned up: the oldest open transactions, and the dead rows.

PostgreSQL: vacuum cannot remove a row version that a transaction of this database (a
snapshot, ``backend_xmin``, or a transaction id, ``backend_xid``), a prepared transaction,
a walsender with hot_standby_feedback or a replication slot might still see; one forgotten
snapshot pins the horizon for every table, and the job table's dead rows pile up under the
claims. MariaDB/MySQL: InnoDB's purge waits for the oldest read view on the whole server,
and the history list (undo not purged yet) grows instead. SQLite keeps no old row versions: not applicable.

Two statements a read on either server, whatever the number of sessions: cheap enough for a
probe or a scrape. A view this role may not read makes that part "unknown" with the
reason, never an error.
"""

from __future__ import annotations

import datetime
from contextlib import nullcontext
from dataclasses import dataclass, field

from django.db import DatabaseError, connections, transaction

from .horizon_queries import (
    MARIADB_HISTORY,
    MYSQL_HISTORY,
    MYSQL_HOLDERS,
    POSTGRESQL_HOLDERS,
    POSTGRESQL_TABLES,
    QUERY_CHARS,
)

#: The kinds of holders that are not transactions: they have no age in time.
NOT_TRANSACTIONS = ("walsender", "replication slot", "catalog slot")


@dataclass(frozen=True)
class Holder:
    """An open transaction, prepared transaction, walsender or replication slot holding old row versions."""

    #: "session", "prepared", "walsender" (PostgreSQL: hot_standby_feedback without a slot),
    #: "replication slot" (its xmin holds every table's rows) or "catalog slot" (a logical
    #: slot's catalog_xmin alone: only the system catalogs' rows).
    kind: str
    #: The backend's pid (PostgreSQL), thread id (MariaDB/MySQL), or a slot's active walsender.
    pid: int | None
    application: str
    user: str
    client: str
    state: str
    #: Seconds it has held rows back, as far as known: since its transaction began (prepared:
    #: since PREPARE), or on MariaDB/MySQL in READ COMMITTED since its running statement began
    #: (it holds no read view between statements); None: not known (hidden from this role).
    age: float | None
    #: The first line of its current or last statement.
    query: str
    #: A prepared transaction's gid, a slot's name.
    name: str
    #: How many transactions (xids) old its horizon is (PostgreSQL): what decides who pins most.
    xid_age: int | None

    @property
    def is_transaction(self) -> bool:
        """Whether it is a transaction with an age in time (not a walsender or a slot)."""
        return self.kind not in NOT_TRANSACTIONS


@dataclass(frozen=True)
class TableRows:
    """Live and dead rows of one of our tables, as the statistics collector counts them."""

    table: str
    live: int
    dead: int
    last_autovacuum: datetime.datetime | None
    autovacuum_count: int
    #: Whether autovacuum may visit it (the server's ``autovacuum`` on, not turned off for the table).
    autovacuum: bool = True

    @property
    def dead_share(self) -> float:
        """Dead rows over all rows, 0.0 to 1.0."""
        total = self.live + self.dead
        return self.dead / total if total else 0.0


@dataclass
class Horizon:
    """What holds back the cleanup of old row versions on one database, at one moment."""

    applicable: bool = True
    #: What the database calls a session's number: "pid" (PostgreSQL), "thread" (MariaDB/MySQL).
    session_id: str = "pid"
    #: Whether horizons are counted in transactions too (xid_age: PostgreSQL).
    counts_xids: bool = False
    holders: list[Holder] = field(default_factory=list)
    tables: list[TableRows] = field(default_factory=list)
    #: InnoDB's history list length: undo records not purged yet (MariaDB/MySQL).
    history_length: int | None = None
    #: False when the transactions could not be read (then `unknown` says why).
    holders_read: bool = True
    #: What could not be read, and why ("pg_stat_activity: permission denied ...").
    unknown: list[str] = field(default_factory=list)

    @property
    def transactions(self) -> list[Holder]:
        """The open and prepared transactions, the oldest horizon first.

        PostgreSQL: by xid age (a transaction may be old and hold a recent snapshot, or
        none); MariaDB/MySQL: by how long each has held its read view. Unknown ages last.
        """
        timed = [h for h in self.holders if h.is_transaction]
        return sorted(
            timed, key=lambda h: (h.xid_age is None, -(h.xid_age or 0), h.age is None, -(h.age or 0.0))
        )

    @property
    def slots(self) -> list[Holder]:
        """The walsenders and replication slots holding rows back (those of all tables first)."""
        return [h for h in self.holders if not h.is_transaction]

    @property
    def oldest(self) -> Holder | None:
        """The transaction with the oldest horizon among those whose age is known; None when none."""
        known = [h for h in self.transactions if h.age is not None]
        return known[0] if known else None

    @property
    def oldest_hidden(self) -> bool:
        """Whether a transaction whose age this role may not read holds the oldest horizon."""
        timed = self.transactions
        return bool(timed) and timed[0].age is None

    @property
    def oldest_xmin_age(self) -> int | None:
        """How many transactions old the oldest horizon of every table is (PostgreSQL), hidden or not."""
        ages = [h.xid_age for h in self.holders if h.xid_age is not None and h.kind != "catalog slot"]
        return max(ages, default=None)


def read_horizon(using: str = "default") -> Horizon:
    """The oldest transactions holding back cleanup on database `using`, and our tables' dead rows.

    PostgreSQL and MariaDB/MySQL; on SQLite, a Horizon that says it is not applicable.
    """
    connection = connections[using]
    if connection.vendor == "postgresql":
        horizon = Horizon(counts_xids=True)
        horizon.holders_read = _read(horizon, using, "pg_stat_activity", POSTGRESQL_HOLDERS, _holders)
        _read(horizon, using, "pg_stat_user_tables", POSTGRESQL_TABLES, _tables)
        return horizon
    if connection.vendor == "mysql":
        horizon = Horizon(session_id="thread")
        horizon.holders_read = _read(horizon, using, "information_schema.INNODB_TRX", MYSQL_HOLDERS, _holders)
        if connection.mysql_is_mariadb:
            _read(horizon, using, "Innodb_history_list_length", MARIADB_HISTORY, _history)
        else:
            _read(horizon, using, "information_schema.INNODB_METRICS", MYSQL_HISTORY, _history)
        return horizon
    return Horizon(applicable=False)


def _read(horizon: Horizon, using: str, view: str, sql: str, keep) -> bool:
    """Run `sql` and `keep` its rows in `horizon`; if it fails, say why in horizon.unknown.

    Inside a caller's transaction, in a savepoint: a refused read must not abort it
    (PostgreSQL). In autocommit mode, no transaction: a scrape's statements stay two.
    """
    connection = connections[using]
    guard = transaction.atomic(using=using) if connection.in_atomic_block else nullcontext()
    try:
        with guard, connection.cursor() as cursor:
            cursor.execute(sql, [])  # [] so that "%%" becomes "%"
            keep(horizon, cursor.fetchall())
    except DatabaseError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        horizon.unknown.append(f"{view}: {reason}")
        return False
    return True


def _holders(horizon: Horizon, rows) -> None:
    horizon.holders = [
        Holder(
            kind,
            pid,
            application or "",
            user or "",
            client or "",
            state or "",
            None if age is None else max(float(age), 0.0),
            first_line(query or ""),
            name or "",
            xid_age,
        )
        for kind, pid, application, user, client, state, age, query, name, xid_age in rows
    ]


def _tables(horizon: Horizon, rows) -> None:
    horizon.tables = [TableRows(*row) for row in rows]


def _history(horizon: Horizon, rows) -> None:
    horizon.history_length = int(rows[0][1]) if rows else None


def first_line(query: str) -> str:
    """The first line of `query` that is not blank, stripped, at most QUERY_CHARS characters."""
    for line in query.splitlines():
        if line.strip():
            return line.strip()[:QUERY_CHARS]
    return ""
