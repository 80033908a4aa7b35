"""bench/sustained.py's minute samples of the job table: its size on disk and its dead rows, per database.

- PostgreSQL: heap and index sizes (``pg_relation_size``), dead tuples and the vacuums
  run (``pg_stat_user_tables``), rows inserted, updated (HOT among them) and deleted;
- MariaDB/MySQL: the table's data and index sizes and its file (``information_schema``),
  and InnoDB's history list length (undo not yet purged: its dead rows);
- SQLite: the database file, its WAL and its free pages.

Each sample also counts the jobs by status and the age of the oldest finished job kept
(how far retention is behind its setting).
"""

from __future__ import annotations

import datetime
import os

from django.db import connection

TABLE = "django_dbjobs_job"
MIB = 1024 * 1024


def sample() -> dict:
    """This minute's figures of the job table (sizes in MiB)."""
    figures = {**_by_vendor(), **_jobs()}
    return {key: round(value, 3) if isinstance(value, float) else value for key, value in figures.items()}


def _by_vendor() -> dict:
    return {"postgresql": _postgresql, "mysql": _mysql, "sqlite": _sqlite}[connection.vendor]()


def _rows(sql: str, params=()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _jobs() -> dict:
    counts = dict(_rows(f"SELECT status, COUNT(*) FROM {TABLE} GROUP BY status"))
    ((oldest,),) = _rows(f"SELECT MIN(finished_at) FROM {TABLE} WHERE status = 'SUCCESSFUL'")
    ((now,),) = _rows("SELECT CURRENT_TIMESTAMP")
    age = None
    if oldest is not None:
        if isinstance(now, str):  # SQLite answers text
            oldest = oldest if not isinstance(oldest, str) else datetime.datetime.fromisoformat(oldest)
            now = datetime.datetime.fromisoformat(now)
        age = (now.replace(tzinfo=None) - oldest.replace(tzinfo=None)).total_seconds()
    return {
        "ready": counts.get("READY", 0),
        "running": counts.get("RUNNING", 0),
        "finished": counts.get("SUCCESSFUL", 0) + counts.get("FAILED", 0),
        "oldest_finished_s": age,
    }


def _postgresql() -> dict:
    ((heap, indexes, total),) = _rows(
        "SELECT pg_relation_size(%s), pg_indexes_size(%s), pg_total_relation_size(%s)", [TABLE] * 3
    )
    ((live, dead, autovacuums, vacuums, inserted, updated, hot, deleted),) = _rows(
        "SELECT n_live_tup, n_dead_tup, autovacuum_count, vacuum_count, n_tup_ins, n_tup_upd, "
        "n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables WHERE relname = %s",
        [TABLE],
    )
    each = _rows(
        "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes WHERE relname = %s",
        [TABLE],
    )
    (xmin_age,) = _rows(
        "SELECT COALESCE(MAX(EXTRACT(EPOCH FROM now() - xact_start)), 0) FROM pg_stat_activity "
        "WHERE datname = current_database() AND backend_xmin IS NOT NULL AND pid <> pg_backend_pid()"
    )[0]
    return {
        "table_mib": heap / MIB,
        "indexes_mib": indexes / MIB,
        "total_mib": total / MIB,
        "live_rows": live,
        "dead_rows": dead,
        "autovacuums": autovacuums + vacuums,
        "inserted": inserted,
        "updated": updated,
        "hot_updated": hot,
        "deleted": deleted,
        "index_mib": {name: size / MIB for name, size in each},
        "oldest_snapshot_s": float(xmin_age),
    }


def _mysql() -> dict:
    if not connection.mysql_is_mariadb:  # MySQL 8 caches table sizes for a day otherwise
        _rows("SET SESSION information_schema_stats_expiry = 0")
    ((data, indexes, free),) = _rows(
        "SELECT data_length, index_length, data_free FROM information_schema.TABLES "
        "WHERE table_schema = DATABASE() AND table_name = %s",
        [TABLE],
    )
    tablespaces = "INNODB_SYS_TABLESPACES" if connection.mysql_is_mariadb else "INNODB_TABLESPACES"
    files = _rows(
        f"SELECT allocated_size FROM information_schema.{tablespaces} "
        "WHERE name = CONCAT(DATABASE(), '/', %s)",
        [TABLE],
    )
    (history,) = _rows(
        "SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'"
    )[0]
    deleted = _rows("SHOW GLOBAL STATUS LIKE 'Innodb_rows_deleted'")
    return {
        "table_mib": data / MIB,
        "indexes_mib": indexes / MIB,
        "total_mib": (files[0][0] if files else data + indexes + free) / MIB,
        "free_mib": free / MIB,
        "history_length": history,
        "deleted": int(deleted[0][1]) if deleted else None,
    }


def _sqlite() -> dict:
    name = connection.settings_dict["NAME"]
    ((pages,),) = _rows("PRAGMA page_count")
    ((free,),) = _rows("PRAGMA freelist_count")
    ((size,),) = _rows("PRAGMA page_size")
    wal = f"{name}-wal"
    return {
        "total_mib": os.path.getsize(name) / MIB,
        "wal_mib": os.path.getsize(wal) / MIB if os.path.exists(wal) else 0.0,
        "free_mib": free * size / MIB,
        "table_mib": (pages - free) * size / MIB,
    }
