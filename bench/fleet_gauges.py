"""What a fleet behind PgBouncer costs, read while it runs (bench/fleet.py): CPU from /proc,
connections and transactions from PostgreSQL's views, clients and queries from PgBouncer's console.

The server's CPU is that of the scratch database's backends only (the pooler's server
connections, the workers' direct ones, autovacuum on its tables), not the whole server's
as W9 reads it: other work on the machine (another benchmark's database) stays out. A
backend first seen during a window counts from zero; one gone before the window's end
keeps its last reading, so sample() often. The bench's own connection is left out.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psycopg

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of process `pid` (all its threads) so far; 0 if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Gauges:
    """Reads for one fleet: `settings` is the scratch database's Django settings dict, `own_pid`
    the bench's backend, `bouncer` the PgBouncer (tests/pgbouncer_server.py), `workers` pids."""

    def __init__(self, settings: dict, own_pid: int, bouncer, workers: list[int]):
        self.name = settings["NAME"]
        self.own_pid = own_pid
        self.bouncer_pid = bouncer.process.pid
        self.workers = workers
        # On database "postgres": its own statements stay out of the scratch database's figures.
        address = {"host": settings.get("HOST") or "127.0.0.1", "port": settings.get("PORT") or 5432}
        self.server = psycopg.connect(
            **address, user=settings.get("USER"), dbname="postgres", autocommit=True
        )
        # PgBouncer's console speaks the simple query protocol only: a ClientCursor's.
        self.console = psycopg.connect(
            host="127.0.0.1",
            port=bouncer.port,
            user=settings.get("USER"),
            dbname="pgbouncer",
            autocommit=True,
        )
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}

    def close(self) -> None:
        self.server.close()
        self.console.close()

    def backends(self) -> list[int]:
        rows = self.server.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s", [self.name, self.own_pid]
        )
        return [pid for (pid,) in rows]

    def start(self) -> dict:
        """Begin a window: the counters now (end() takes the difference)."""
        self.base = {pid: cpu_seconds(pid) for pid in self.backends()}
        self.last = dict(self.base)
        return self.counters()

    def sample(self) -> None:
        """Read the CPU of the database's backends now (new ones count from zero)."""
        for pid in self.backends():
            self.base.setdefault(pid, 0.0)
            self.last[pid] = cpu_seconds(pid)

    def end(self, started: dict) -> dict:
        """The window's differences since start(): seconds, CPU seconds, transactions, queries."""
        self.sample()
        now = self.counters()
        taken = {key: now[key] - started[key] for key in now}
        taken["server CPU"] = sum(self.last[pid] - self.base[pid] for pid in self.last)
        return taken

    def counters(self) -> dict:
        (xacts,) = self.server.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", [self.name]
        ).fetchone()
        return {
            "seconds": time.monotonic(),
            "transactions": xacts,
            "pooler queries": int(self._console("SHOW STATS")["total_query_count"]),
            "pooler CPU": cpu_seconds(self.bouncer_pid),
            "workers CPU": sum(cpu_seconds(pid) for pid in self.workers),
        }

    def connections(self) -> dict:
        """Connections now: to the database (direct and pooled), to the whole server, at PgBouncer."""
        pool = self._console("SHOW POOLS")
        pooled = sum(pool[key] for key in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))
        (database, server, limit) = self.server.execute(
            "SELECT count(*) FILTER (WHERE datname = %s AND pid <> %s),"
            " count(*) FILTER (WHERE backend_type = 'client backend'),"
            " current_setting('max_connections')::int FROM pg_stat_activity",
            [self.name, self.own_pid],
        ).fetchone()
        return {
            "server connections, pooled": pooled,
            "server connections, direct": database - pooled,
            "server connections, whole server": server,
            "max_connections": limit,
            "clients at PgBouncer": pool["cl_active"] + pool["cl_waiting"],
            "clients waiting at PgBouncer": pool["cl_waiting"],
        }

    def _console(self, command: str) -> dict:
        """The scratch database's row of PgBouncer's `command` (SHOW POOLS, SHOW STATS), by column."""
        cursor = psycopg.ClientCursor(self.console)
        cursor.execute(command)
        names = [column.name for column in cursor.description]
        for row in cursor.fetchall():
            if row[0] == self.name:
                return dict(zip(names, row, strict=True))
        return dict.fromkeys(names, 0)  # no client came through it yet (the "direct" way)
