"""What the long-transaction tests share: a second connection holding a snapshot, the status command."""

import io
import threading
from contextlib import contextmanager

from django.core.management import call_command
from django.db import connections

from django_dbjobs.models import Job

APPLICATION = "dbjobs-test-holder"
#: The holder's last statement: it starts with a blank line, which the report skips.
HOLDER_QUERY = f"\n  SELECT COUNT(*) FROM {Job._meta.db_table}  -- the holder\n  WHERE 1 = 1"


def status(*args) -> str:
    out = io.StringIO()
    call_command("dbjobs_status", *args, stdout=out)
    return out.getvalue()


@contextmanager
def other_connection():
    """A new connection to the test database (named APPLICATION on PostgreSQL), and its pid or thread id.

    Whatever transaction it is left in is rolled back at the end, and it is closed.
    """
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            if other.vendor == "postgresql":
                cursor.execute("SET application_name = %s", [APPLICATION])
                cursor.execute("SELECT pg_backend_pid()")
            else:
                cursor.execute("SELECT CONNECTION_ID()")
            pid = cursor.fetchone()[0]
        yield other, pid
    finally:
        with other.cursor() as cursor:
            cursor.execute("ROLLBACK")
        other.close()


@contextmanager
def snapshot_held():
    """A second connection in a REPEATABLE READ transaction that has read (so holds a snapshot), left open."""
    with other_connection() as (other, pid):
        with other.cursor() as cursor:
            if other.vendor == "postgresql":
                cursor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            else:  # Django's READ COMMITTED would take no snapshot that lasts
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cursor.execute(HOLDER_QUERY)
        yield other, pid


def running(other, sql: str) -> threading.Thread:
    """Run `sql` on connection `other` in a thread (the statement takes a while); joined by the caller."""

    def run():
        try:
            with other.cursor() as cursor:
                cursor.execute(sql)
        finally:
            other.dec_thread_sharing()

    other.inc_thread_sharing()
    thread = threading.Thread(target=run)
    thread.start()
    return thread
