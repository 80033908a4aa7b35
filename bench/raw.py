"""The raw limit: the least SQL a job costs, from Python, through the same driver.

No Django models, no validation, no worker: a plain loop of INSERTs, one per job or
many per statement (W1), a plain loop of SKIP LOCKED claims plus completion writes
(W2), per database, and on PostgreSQL a bare LISTEN-and-claim process woken by the
same NOTIFY (W3: raw_listener.py).
"""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.db import connection

INSERT = (
    "INSERT INTO django_dbjobs_job (id, name, args, kwargs, queue, priority, status, attempts,"
    " max_attempts, worker_ids, errors, last_error) VALUES"
    " (%s, 'bench.jobs.noop', '[]', '{}', 'default', 0, 'READY', 0, 3, '[]', '[]', '')"
)
NOW = {"postgresql": "STATEMENT_TIMESTAMP()", "mysql": "CURRENT_TIMESTAMP(6)"}.get(
    connection.vendor, "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW')"
)
# The claim index covers READY jobs no flow control holds back (blocked = ''): the pick says so.
PICK = (
    "SELECT id FROM django_dbjobs_job WHERE status = 'READY' AND blocked = '' AND run_at <= {now}"
    " ORDER BY priority DESC, run_at, id LIMIT {limit}"
)


def insert_loop(count: int) -> float:
    """Autocommit INSERTs, one per job; return jobs/s."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for _ in range(count):
            cursor.execute(INSERT, [str(uuid.uuid4())])
    return count / (time.perf_counter() - started)


def bulk_insert_loop(count: int, batch: int = 1000) -> float:
    """The same rows in multi-row INSERTs of `batch` (UNNEST arrays on PostgreSQL); return jobs/s."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for start in range(0, count, batch):
            bulk_insert(cursor, min(batch, count - start))
    return count / (time.perf_counter() - started)


def bulk_insert(cursor, rows: int) -> None:
    """One multi-row INSERT of `rows` jobs (autocommit: a transaction of its own)."""
    columns = (
        "id, name, args, kwargs, queue, priority, status, attempts, max_attempts,"
        " worker_ids, errors, last_error"
    )
    constants = "'bench.jobs.noop', '[]', '{}', 'default', 0, 'READY', 0, 3, '[]', '[]', ''"
    ids = [str(uuid.uuid4()) for _ in range(rows)]
    if connection.vendor == "postgresql":
        cursor.execute(
            f"INSERT INTO django_dbjobs_job ({columns})"
            f" SELECT i, {constants} FROM UNNEST(%s::text[]) AS t(i)",
            [ids],
        )
    else:
        values = ", ".join([f"(%s, {constants})"] * rows)
        cursor.execute(f"INSERT INTO django_dbjobs_job ({columns}) VALUES {values}", ids)


def claim(cursor, limit: int) -> list[str]:
    pick = PICK.format(now=NOW, limit=limit)
    if connection.vendor == "postgresql":
        cursor.execute(
            f"UPDATE django_dbjobs_job SET status = 'RUNNING', worker = 'raw', attempts = attempts + 1"
            f" WHERE id IN ({pick} FOR UPDATE SKIP LOCKED) RETURNING id",
            [],
        )
        return [row[0] for row in cursor.fetchall()]
    # Explicit BEGIN/COMMIT: the fewest round trips a transaction can take.
    mysql = connection.vendor == "mysql"
    cursor.execute("START TRANSACTION" if mysql else "BEGIN IMMEDIATE")
    cursor.execute(pick + (" FOR UPDATE SKIP LOCKED" if mysql else ""), [])
    ids = [row[0] for row in cursor.fetchall()]
    if ids:
        marks = ", ".join(["%s"] * len(ids))
        cursor.execute(
            "UPDATE django_dbjobs_job SET status = 'RUNNING', worker = 'raw',"
            f" attempts = attempts + 1 WHERE id IN ({marks})",
            ids,
        )
    cursor.execute("COMMIT")
    return ids


def drain_loop(claim_size: int, batch_completions: bool) -> float:
    """Claim `claim_size` at a time and complete each job (or each batch); return jobs/s."""
    done = 0
    started = time.perf_counter()
    with connection.cursor() as cursor:
        while ids := claim(cursor, claim_size):
            finish = (
                "UPDATE django_dbjobs_job SET status = 'SUCCESSFUL', finished_at = {now}"
                " WHERE worker = 'raw' AND status = 'RUNNING' AND id IN ({marks})"
            )
            groups = [ids] if batch_completions else [[i] for i in ids]
            for group in groups:
                marks = ", ".join(["%s"] * len(group))
                cursor.execute(finish.format(now=NOW, marks=marks), group)
            done += len(ids)
    return done / (time.perf_counter() - started)


def wakeup_loop(count: int, enqueue_one) -> list[float]:
    """PostgreSQL: milliseconds from each commit of `enqueue_one()` (which returns the job's
    id) to its start by raw_listener.py, one job every 50 ms, as W3 times run_jobs."""
    from psycopg.conninfo import make_conninfo

    params = connection.get_connection_params()  # as Django connects, OPTIONS included
    for key in ("cursor_factory", "context", "prepare_threshold", "server_side_binding"):
        params.pop(key, None)
    conninfo = make_conninfo(**params)  # in the environment, not the command line (a password)
    listener = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("raw_listener.py"))],
        env={**os.environ, "BENCH_RAW_CONNINFO": conninfo},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        if listener.stdout.readline().strip() != "ready":
            raise SystemExit("raw_listener.py did not start")
        time.sleep(1.0)  # as W3 lets run_jobs settle
        committed = {}
        for _ in range(count):
            job_id = enqueue_one()
            committed[job_id] = time.time()
            time.sleep(0.05)
        out, _ = listener.communicate("", timeout=60)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.wait()
    started = dict(line.split() for line in out.splitlines())
    if set(started) != set(committed):
        raise SystemExit(f"raw_listener.py started {len(started)} of {len(committed)} jobs")
    return sorted((float(started[pk]) - at) * 1000 for pk, at in committed.items())
