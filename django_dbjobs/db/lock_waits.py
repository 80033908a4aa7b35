"""Writing without waiting for locks: a write that would wait for another transaction gives up at once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connections


@contextlib.contextmanager
def never_waiting(using: str) -> Iterator[None]:
    """Make a write on `using` fail at once ("database is locked") rather than wait for a lock.

    SQLite only, where a transaction writing anywhere holds the whole database: its busy
    timeout (the recommended 20 s, SQLITE_RECOMMENDED_OPTIONS) is set to 0 for the block,
    then put back.
    PostgreSQL and MySQL/MariaDB lock rows: there the caller skips the locked ones
    (lock_or_skip()) and so never waits, and nothing changes here.
    """
    connection = connections[using]
    if connection.vendor != "sqlite":
        yield
        return
    # Put back as it was: Django's timeout, or a project's own PRAGMA busy_timeout (init_command).
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        busy = int(cursor.fetchone()[0])
        cursor.execute("PRAGMA busy_timeout = 0")
    try:
        yield
    finally:
        if connection.connection is not None:  # not closed by an outage meanwhile
            with connection.cursor() as cursor:
                cursor.execute(f"PRAGMA busy_timeout = {busy}")
