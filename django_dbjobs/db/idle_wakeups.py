"""How idle workers learn of new jobs on each database: NOTIFY, PRAGMA data_version, or a probe."""

from __future__ import annotations

from django.db import connections

from ..conf import settings
from .triggers import CHANNEL

#: Seconds between an idle worker's indexed probes for new jobs: the first, and the longest
#: (after a while idle). MySQL/MariaDB's, and PostgreSQL's behind a pooler.
PROBE_STEPS = (0.01, 0.05)


def supports_listen(using: str = "default") -> bool:
    """True where workers of `using` can LISTEN for NOTIFY (PostgreSQL through psycopg 3.2+)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return False
    try:
        import psycopg
    except ImportError:  # psycopg2: polling only
        return False
    return hasattr(psycopg.Connection, "notifies")


def notify_workers(using: str = "default") -> None:
    """Wake idle workers when this transaction commits: PostgreSQL's NOTIFY (the triggers
    send it for new and READY-again jobs; a job made claimable otherwise needs this).
    Elsewhere workers find such jobs at their next poll or probe."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [CHANNEL])


def idle_check_steps(using: str = "default") -> tuple[float, float] | None:
    """Seconds between an idle worker's checks for other processes' commits: (first, longest).

    None where LISTEN/NOTIFY wakes workers instead (PostgreSQL). SQLite reads
    ``PRAGMA data_version`` every 10 ms (memory only); MySQL/MariaDB run an indexed
    probe, every 10 ms at first and every 50 ms after a while idle.
    """
    return {"sqlite": (0.01, 0.01), "mysql": PROBE_STEPS}.get(connections[using].vendor)


def named_listen_alias(using: str = "default") -> str | None:
    """The alias ``DBJOBS_LISTEN_DATABASE`` names for workers of `using`, if any: the setting
    itself (a string), or its value for `using` (a dict {worker alias: LISTEN alias})."""
    named = settings.LISTEN_DATABASE
    return named.get(using) if isinstance(named, dict) else named


def uses_data_version(using: str = "default") -> bool:
    """True where PRAGMA data_version tells that another connection committed (SQLite)."""
    return connections[using].vendor == "sqlite"


def data_version(using: str = "default") -> int:
    """SQLite: a counter that changes when another connection commits (nearly free)."""
    with connections[using].cursor() as cursor:
        cursor.execute("PRAGMA data_version")
        return cursor.fetchone()[0]
