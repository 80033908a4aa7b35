"""Long transactions as dbjobs_status shows them: who holds back the cleanup of dead rows, and since when.

One read of db/horizon.py (two statements on PostgreSQL and MariaDB/MySQL, none on
SQLite). The transaction with the oldest horizon (what pins the oldest row versions,
not the one that began first) is named once it is older than a threshold; its dead-row
share of the job table says what it costs. Slots, walsenders and many dead rows are
shown whatever the transactions' ages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..db.horizon import Holder, Horizon, TableRows, read_horizon
from ..models import Job

#: Seconds after which dbjobs_status names the oldest transaction (--long-transaction-after).
DEFAULT_LONG_TRANSACTION = 60.0
#: The job table's dead rows are always reported from this many and this share of its rows.
MANY_DEAD_ROWS, MANY_DEAD_SHARE = 1000, 0.1


@dataclass
class LongTransactions:
    """The horizon read, with the age past which a transaction is shown as long."""

    horizon: Horizon
    #: Transactions older than this are shown.
    after: float
    #: The job table's name, whose dead rows are shown.
    job_table: str

    @property
    def culprit(self) -> Holder | None:
        """The transaction with the oldest horizon (of those with a known age), if older than `after`."""
        oldest = self.horizon.oldest
        return oldest if oldest is not None and oldest.age is not None and oldest.age > self.after else None

    @property
    def long(self) -> list[Holder]:
        """The culprit, then the other transactions older than `after`; none while the culprit is not."""
        if self.culprit is None:
            return []
        return [h for h in self.horizon.transactions if h.age is not None and h.age > self.after]

    @property
    def hidden(self) -> list[Holder]:
        """The transactions this role may not see the age of (PostgreSQL without pg_read_all_stats)."""
        return [h for h in self.horizon.transactions if h.age is None]

    @property
    def job_rows(self) -> TableRows | None:
        return next((t for t in self.horizon.tables if t.table == self.job_table), None)

    @property
    def many_dead(self) -> bool:
        """Whether the job table's dead rows are worth a line whatever else: 1,000 and a tenth."""
        rows = self.job_rows
        return rows is not None and rows.dead >= MANY_DEAD_ROWS and rows.dead_share >= MANY_DEAD_SHARE

    def problem(self, limit: float) -> str | None:
        """Why dbjobs_status fails with --fail-if-long-transaction `limit`; None if it need not.

        The transaction with the oldest horizon is judged by its age; one the role may not
        see the age of is not (the report says it is hidden). Holders that could not be read
        at all are a problem: a probe that cannot see must not say healthy.
        """
        if self.horizon.applicable and not self.horizon.holders_read:
            reason = self.horizon.unknown[0]
            return f"cannot tell whether a transaction holds back the cleanup of dead rows: {reason}"
        oldest = self.horizon.oldest
        if oldest is None or oldest.age is None or oldest.age <= limit:
            return None
        who = holder_text(oldest, self.horizon.session_id)
        return (
            f"{who} (limit {limit:g}s): it keeps dead rows from being cleaned up; "
            "end it (see 'Long transactions and dead rows' in the docs)"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "applicable": self.horizon.applicable,
            "unknown": self.horizon.unknown,
            "shown_after_seconds": self.after,
            "culprit": holder_json(self.culprit) if self.culprit else None,
            "transactions": [holder_json(h) for h in self.horizon.transactions],
            "replication_slots": [holder_json(h) for h in self.horizon.slots],
            "oldest_xmin_age": self.horizon.oldest_xmin_age,
            "history_length": self.horizon.history_length,
            "tables": [
                {
                    "table": t.table,
                    "live_rows": t.live,
                    "dead_rows": t.dead,
                    "dead_share": round(t.dead_share, 4),
                    "last_autovacuum": t.last_autovacuum.isoformat() if t.last_autovacuum else None,
                    "autovacuum_count": t.autovacuum_count,
                    "autovacuum": t.autovacuum,
                }
                for t in self.horizon.tables
            ],
        }

    def lines(self) -> list[str]:
        """The "Oldest transaction" part of dbjobs_status's table: what holds rows back, if anything."""
        if not self.horizon.applicable:
            return ["Oldest transaction: not applicable (SQLite keeps no old row versions)"]
        text = [f"Oldest transaction: unknown ({reason})" for reason in self.horizon.unknown]
        if self.hidden:
            oldest = " (the oldest horizon among them)" if self.horizon.oldest_hidden else ""
            text.append(
                f"Transactions hidden from this role: {len(self.hidden)}{oldest} (<insufficient privilege>: "
                "grant it pg_read_all_stats to see who holds them and since when)"
            )
        named = self.horizon.session_id
        long = self.long
        if long:
            text.append(f"Oldest transaction: {holder_text(long[0], named)}")
            text.extend(f"  also {holder_text(holder, named)}" for holder in long[1:])
        text.extend(slot_text(slot) for slot in self.horizon.slots)
        rows = self.job_rows
        if rows is not None and self.many_dead and not rows.autovacuum:
            text.append(
                f"Autovacuum is off for {rows.table} (the server's autovacuum setting, or the "
                f"table's autovacuum_enabled): its {rows.dead} dead rows ({rows.dead_share:.0%}) "
                "stay until a VACUUM; turn it on"
            )
        elif rows is not None and (long or self.many_dead):
            vacuumed = f"{rows.last_autovacuum:%Y-%m-%d %H:%M} UTC" if rows.last_autovacuum else "never"
            text.append(
                f"{rows.table}: {rows.dead_share:.0%} dead rows ({rows.dead} dead, {rows.live} live), "
                f"last autovacuum {vacuumed} ({rows.autovacuum_count} runs)"
            )
        if long and self.horizon.history_length is not None:
            text.append(f"InnoDB history list length: {self.horizon.history_length} (undo not purged yet)")
        return text


def read_long_transactions(
    using: str = "default", after: float = DEFAULT_LONG_TRANSACTION
) -> LongTransactions:
    """The transactions holding back cleanup on database `using`, shown past `after` seconds."""
    return LongTransactions(read_horizon(using), after, Job._meta.db_table)


def holder_text(holder: Holder, session_id: str = "pid") -> str:
    """A transaction in one line: who, where, since when, and what it ran last."""
    who = "prepared transaction" if holder.kind == "prepared" else session_id
    ident = repr(holder.name) if holder.kind == "prepared" else str(holder.pid)
    about = [
        f"application {holder.application!r}" if holder.application else "",
        f"user {holder.user}" if holder.user else "",
        f"from {holder.client}" if holder.client else "",
        holder.state,
    ]
    details = ", ".join(part for part in about if part)
    age = "for an unknown time" if holder.age is None else f"for {age_text(holder.age)}"
    xids = "" if holder.xid_age is None else f", holds rows {holder.xid_age} transactions old"
    query = f": {holder.query}" if holder.query else ""
    return f"{who} {ident}" + (f" ({details})" if details else "") + f" open {age}{xids}{query}"


def slot_text(holder: Holder) -> str:
    """A walsender or replication slot in one line: how old the rows it holds are."""
    if holder.kind == "walsender":
        about = ", ".join(
            part
            for part in (f"application {holder.application!r}" if holder.application else "", holder.client)
            if part
        )
        who = f"Walsender pid {holder.pid}" + (f" ({about})" if about else "")
        return f"{who} holds rows {holder.xid_age} transactions old (hot_standby_feedback, no slot)"
    if holder.kind == "catalog slot":
        return (
            f"Logical replication slot {holder.name!r} ({holder.state}) holds system catalog rows "
            f"{holder.xid_age} transactions old (catalog_xmin: not the job tables')"
        )
    return f"Replication slot {holder.name!r} ({holder.state}) holds rows {holder.xid_age} transactions old"


def holder_json(holder: Holder) -> dict[str, Any]:
    return {
        "kind": holder.kind,
        # The pid on PostgreSQL, the thread id (SHOW PROCESSLIST's Id, KILL's) on MariaDB/MySQL.
        "pid": holder.pid,
        "application": holder.application,
        "user": holder.user,
        "client": holder.client,
        "state": holder.state,
        "age_seconds": None if holder.age is None else round(holder.age, 3),
        "query": holder.query,
        "name": holder.name,
        "xid_age": holder.xid_age,
    }


def age_text(seconds: float) -> str:
    """Seconds as dbjobs_status shows an age: 12.5s, 14.0m, 3.2h."""
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"
