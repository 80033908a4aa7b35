"""The raw wake-up limit on PostgreSQL (W3): the least a notified worker can do, in a process.

    BENCH_RAW_CONNINFO="host=127.0.0.1 port=5432 user=root dbname=test_dbjobs_bench" \
        python bench/raw_listener.py

No Django: one psycopg connection in autocommit LISTENs on the channel the job table's
trigger notifies, waits in poll() on its socket, and once woken claims the due jobs one
at a time with the raw claim of bench/raw.py (``UPDATE ... WHERE id IN (SELECT ... FOR
UPDATE SKIP LOCKED) RETURNING id``, prepared, its commit waiting for the WAL flush as every
commit does by default), then "starts" each: prints its id and ``time.time()``. Prints
``ready`` once listening; stops when its standard input closes. A notification psycopg
reads while a claim runs is not left for poll(): it makes the loop claim again.
"""

from __future__ import annotations

import os
import select
import sys
import time

import psycopg

CLAIM = (
    "UPDATE django_dbjobs_job SET status = 'RUNNING', worker = 'raw', attempts = attempts + 1"
    " WHERE id IN (SELECT id FROM django_dbjobs_job WHERE status = 'READY' AND blocked = ''"
    " AND run_at <= STATEMENT_TIMESTAMP() ORDER BY priority DESC, run_at, id LIMIT 1"
    " FOR UPDATE SKIP LOCKED) RETURNING id"
)


def main(conninfo: str) -> None:
    connection = psycopg.connect(conninfo, autocommit=True)
    connection.execute("LISTEN dbjobs")
    connection.execute(CLAIM, prepare=True)  # prepared before the first wake-up
    heard = []  # notifications psycopg took while a claim ran
    connection.add_notify_handler(heard.append)
    pgconn = connection.pgconn
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN)
    poller.register(sys.stdin.fileno(), select.POLLIN)
    started = []
    print("ready", flush=True)
    while True:
        events = {} if heard else dict(poller.poll())
        if sys.stdin.fileno() in events:
            break
        heard.clear()
        pgconn.consume_input()
        while pgconn.notifies() is not None:
            pass
        while rows := connection.execute(CLAIM, prepare=True).fetchall():
            started.append((rows[0][0], time.time()))  # the job's first line
    for job_id, at in started:
        print(job_id, repr(at))


if __name__ == "__main__":
    main(os.environ["BENCH_RAW_CONNINFO"])
