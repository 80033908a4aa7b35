"""What keeps dead rows from being cleaned up: the oldest open transactions, and the dead rows.

PostgreSQL: vacuum cannot remove a row version that a transaction of this database (a
snapshot, ``backend_xmin``, or a transaction id, ``backend_xid``), a prepared transaction
or a replication slot might still see; one forgotten session pins the horizon for every
table, and the job table's dead rows pile up under the claims. MariaDB/MySQL: InnoDB's
purge waits for the oldest read view on the whole server, and the history list (undo
not purged yet) grows instead. SQLite keeps no old row versions: not applicable.

Two statements a read on either server, whatever the number of sessions: cheap enough for a
probe or a scrape. A view this role may not read makes that part "unknown" with the
reason, never an error.
"""

from __future__ import annotations

import datetime
from contextlib import nullcontext
from dataclasses import dataclass, field

from django.db import DatabaseError, connections, transaction

#: Open transactions read, the oldest first.
MAX_HOLDERS = 5
#: Characters kept of the first line of a transaction's statement.
QUERY_CHARS = 200

# The sessions (those this role may not see have no start: NULL, and the text PostgreSQL
# puts in their query), then the prepared transactions and the replication slots; the
# age in transactions (xid) where no time is known. VACUUM's own snapshot holds nothing back.
POSTGRESQL_HOLDERS = f"""
(SELECT 'session', pid, application_name, usename, host(client_addr), state,
        EXTRACT(EPOCH FROM clock_timestamp() - xact_start)::float8,
        left(split_part(btrim(query, E' \\t\\r\\n'), E'\\n', 1), {QUERY_CHARS}), '',
        greatest(age(backend_xid), age(backend_xmin))
   FROM pg_stat_activity
  WHERE datname = current_database() AND pid <> pg_backend_pid()
    AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
    AND backend_type IS DISTINCT FROM 'autovacuum worker'
  ORDER BY xact_start IS NULL, xact_start LIMIT {MAX_HOLDERS})
UNION ALL
(SELECT 'prepared', NULL, '', owner, '', '', EXTRACT(EPOCH FROM clock_timestamp() - prepared)::float8,
        '', gid, age(transaction)
   FROM pg_prepared_xacts WHERE database = current_database() ORDER BY prepared LIMIT {MAX_HOLDERS})
UNION ALL
(SELECT 'replication slot', active_pid, '', '', '', CASE WHEN active THEN 'active' ELSE 'inactive' END,
        NULL, '', slot_name, greatest(age(xmin), age(catalog_xmin))
   FROM pg_replication_slots WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
  ORDER BY 10 DESC LIMIT {MAX_HOLDERS})
"""
# The last column: whether autovacuum may visit the table (on for the server, not off for it).
POSTGRESQL_TABLES = r"""
SELECT s.relname, s.n_live_tup, s.n_dead_tup, s.last_autovacuum, s.autovacuum_count,
       current_setting('autovacuum') = 'on' AND NOT EXISTS (
           SELECT 1 FROM unnest(c.reloptions) AS o WHERE o ~* '^autovacuum_enabled=(false|off|no|n|f|0)$')
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
 WHERE s.relname LIKE 'django\_dbjobs\_%%' AND s.schemaname = ANY(current_schemas(false)) ORDER BY s.relname
"""
# Every database's transactions: InnoDB's purge waits for the oldest read view of the server.
# INNODB_TRX is a copy InnoDB refreshes at most every 0.1 s: a transaction just ended may linger.
MYSQL_HOLDERS = f"""
SELECT 'session', t.trx_mysql_thread_id, '', p.USER, p.HOST,
       CONCAT_WS(', ', CONCAT('db ', p.DB), p.COMMAND, NULLIF(p.STATE, '')),
       TIMESTAMPDIFF(SECOND, t.trx_started, NOW()),
       LEFT(SUBSTRING_INDEX(TRIM(COALESCE(t.trx_query, p.INFO, '')), '\\n', 1), {QUERY_CHARS}), '', NULL
  FROM information_schema.INNODB_TRX t
  LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
 WHERE t.trx_mysql_thread_id <> CONNECTION_ID()
 ORDER BY t.trx_started LIMIT {MAX_HOLDERS}
"""
# Enabled by default on MariaDB 10.11 and MySQL 8 (innodb_monitor_enable otherwise).
MYSQL_HISTORY = "SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'"


@dataclass(frozen=True)
class Holder:
    """An open transaction, prepared transaction or replication slot holding old row versions."""

    #: "session", "prepared" or "replication slot".
    kind: str
    #: The backend's pid (PostgreSQL), thread id (MariaDB/MySQL), or a slot's active walsender.
    pid: int | None
    application: str
    user: str
    client: str
    state: str
    #: Seconds since its transaction began (prepared: since PREPARE); None: not known.
    age: float | None
    #: The first line of its current or last statement.
    query: str
    #: A prepared transaction's gid, a slot's name.
    name: str
    #: How many transactions (xids) old its horizon is (PostgreSQL).
    xid_age: int | None

    @property
    def is_transaction(self) -> bool:
        """Whether it is a transaction with an age in time (not a replication slot)."""
        return self.kind != "replication slot"


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
        """The open and prepared transactions, the oldest first (those of unknown age last)."""
        timed = [h for h in self.holders if h.is_transaction]
        return sorted(timed, key=lambda h: (h.age is None, -(h.age or 0.0)))

    @property
    def slots(self) -> list[Holder]:
        return [h for h in self.holders if not h.is_transaction]

    @property
    def oldest(self) -> Holder | None:
        """The oldest transaction whose age is known; None when there is none."""
        known = [h for h in self.transactions if h.age is not None]
        return known[0] if known else None


def read_horizon(using: str = "default") -> Horizon:
    """The oldest transactions holding back cleanup on database `using`, and our tables' dead rows.

    PostgreSQL and MariaDB/MySQL; on SQLite, a Horizon that says it is not applicable.
    """
    connection = connections[using]
    if connection.vendor == "postgresql":
        horizon = Horizon()
        horizon.holders_read = _read(horizon, using, "pg_stat_activity", POSTGRESQL_HOLDERS, _holders)
        _read(horizon, using, "pg_stat_user_tables", POSTGRESQL_TABLES, _tables)
        return horizon
    if connection.vendor == "mysql":
        horizon = Horizon(session_id="thread")
        horizon.holders_read = _read(horizon, using, "information_schema.INNODB_TRX", MYSQL_HOLDERS, _holders)
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
            query or "",
            name or "",
            xid_age,
        )
        for kind, pid, application, user, client, state, age, query, name, xid_age in rows
    ]


def _tables(horizon: Horizon, rows) -> None:
    horizon.tables = [TableRows(*row) for row in rows]


def _history(horizon: Horizon, rows) -> None:
    horizon.history_length = int(rows[0][0]) if rows else None
