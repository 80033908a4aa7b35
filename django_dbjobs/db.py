"""Everything that differs by database, and nothing else.

Each helper says which databases need it and why. Everything outside this module
asks these helpers (or Django's feature flags) instead of looking at the vendor.
"""

from __future__ import annotations

import datetime
import json

from django.db import connections, models, transaction
from django.db.models import Q
from django.db.models.functions import Now

from .exceptions import UnsupportedDatabase

SQLITE_RECOMMENDED_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


class ReadyJobsIndex(models.Index):
    """The claim index: over READY rows only, where the database has partial indexes.

    MySQL and MariaDB have no partial indexes (Django would drop the condition and
    warn, models.W037), so there the index is a plain one led by the status column,
    which serves ``WHERE status = 'READY' ORDER BY ...`` as well. The condition is
    added here rather than passed to Index, so no Django version warns about it.
    """

    def create_sql(self, model, schema_editor, using="", **kwargs):
        if schema_editor.connection.features.supports_partial_indexes:
            index = models.Index(fields=self.fields, name=self.name, condition=Q(status="READY"))
        else:
            index = models.Index(fields=["status", *self.fields], name=self.name)
        return index.create_sql(model, schema_editor, using=using, **kwargs)


def can_skip_locked(using: str = "default") -> bool:
    """True where row locks with SKIP LOCKED exist (PostgreSQL, MySQL 8, MariaDB 10.6+)."""
    return connections[using].features.has_select_for_update_skip_locked


def ensure_supported(using: str = "default") -> None:
    """Raise UnsupportedDatabase where concurrent workers would be unsafe or stall.

    MySQL before 8.0.1 and MariaDB before 10.6 accept FOR UPDATE but not SKIP LOCKED,
    so workers would queue behind each other's locks.
    """
    connection = connections[using]
    if connection.features.has_select_for_update and not can_skip_locked(using):
        connection.ensure_connection()
        raise UnsupportedDatabase(
            f"{connection.display_name} {connection.get_database_version()} has no "
            "SELECT ... FOR UPDATE SKIP LOCKED; django_dbjobs needs PostgreSQL, "
            "MySQL 8.0.1+ or MariaDB 10.6+."
        )


def seconds_from_now(seconds: float) -> models.Expression:
    """The database clock plus `seconds`, as an expression for an UPDATE."""
    return Now() + datetime.timedelta(seconds=seconds)


def database_now(using: str = "default"):
    """The database clock as the driver returns it (SQLite: text; MySQL: naive UTC)."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {NOW_SQL[connection.vendor]}", [])  # [] so "%%" becomes "%"
        return cursor.fetchone()[0]


def rejects_nul(using: str = "default") -> bool:
    """True where text and JSON columns cannot store U+0000 (PostgreSQL)."""
    return connections[using].vendor == "postgresql"


def supports_listen(using: str = "default") -> bool:
    """True where workers can LISTEN for NOTIFY (PostgreSQL through psycopg 3.2+)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return False
    try:
        import psycopg
    except ImportError:  # psycopg2: polling only
        return False
    return hasattr(psycopg.Connection, "notifies")


def idle_check_steps(using: str = "default") -> tuple[float, float] | None:
    """Seconds between an idle worker's checks for other processes' commits: (first, longest).

    None where LISTEN/NOTIFY wakes workers instead (PostgreSQL). SQLite reads
    ``PRAGMA data_version`` every 10 ms (memory only); MySQL/MariaDB run an indexed
    probe, every 10 ms at first and every 50 ms after a while idle.
    """
    return {"sqlite": (0.01, 0.01), "mysql": (0.01, 0.05)}.get(connections[using].vendor)


def uses_data_version(using: str = "default") -> bool:
    """True where PRAGMA data_version tells that another connection committed (SQLite)."""
    return connections[using].vendor == "sqlite"


def data_version(using: str = "default") -> int:
    """SQLite: a counter that changes when another connection commits (nearly free)."""
    with connections[using].cursor() as cursor:
        cursor.execute("PRAGMA data_version")
        return cursor.fetchone()[0]


def sqlite_settings_problems(settings_dict: dict) -> list[str]:
    """Return which of SQLITE_RECOMMENDED_OPTIONS an SQLite database is missing."""
    options = settings_dict.get("OPTIONS", {})
    problems = []
    if str(options.get("transaction_mode", "")).upper() not in ("IMMEDIATE", "EXCLUSIVE"):
        problems.append("transaction_mode")
    if "journal_mode=wal" not in str(options.get("init_command", "")).lower().replace(" ", ""):
        problems.append("init_command")
    return problems


# Hot-path SQL. The claim and the batched completion are written out by hand: each
# runs once per batch of jobs, and the ORM's query building cost more than the
# database's work for them.

NOW_SQL = {
    "postgresql": "STATEMENT_TIMESTAMP()",
    "mysql": "CURRENT_TIMESTAMP(6)",
    "sqlite": "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW')",
}
#: How a JSON text parameter is written into an INSERT.
JSON_PLACEHOLDER = {"postgresql": "%s::jsonb", "mysql": "%s", "sqlite": "%s"}
APPEND_SQL = {
    "postgresql": "worker_ids || jsonb_build_array(%s::text)",
    "mysql": "JSON_ARRAY_APPEND(worker_ids, '$', %s)",
    "sqlite": "json_insert(worker_ids, '$[#]', %s)",
}


def claim_statements(model, using: str, limit: int, queues: list[str] | None) -> tuple[str, str, list]:
    """The claim's SQL: (pick, mark, pick parameters).

    `pick` selects due READY jobs in claim order (``{what}`` is the column list),
    locking them with SKIP LOCKED where rows can be locked; `mark` (parameters: the
    worker twice, then its WHERE) makes them RUNNING for a worker.
    """
    connection = connections[using]
    vendor = connection.vendor
    table = connection.ops.quote_name(model._meta.db_table)
    now = NOW_SQL[vendor]
    queue_sql = f" AND queue IN ({', '.join(['%s'] * len(queues))})" if queues else ""
    pick = (
        f"SELECT {{what}} FROM {table} WHERE status = 'READY' AND run_at <= {now}{queue_sql}"
        f" ORDER BY priority DESC, run_at, id LIMIT %s"
        + (" FOR UPDATE SKIP LOCKED" if can_skip_locked(using) else "")
    )
    mark = (
        f"UPDATE {table} SET status = 'RUNNING', worker = %s, attempts = attempts + 1,"
        f" started_at = COALESCE(started_at, {now}), last_attempted_at = {now},"
        f" worker_ids = {APPEND_SQL[vendor]}"
    )
    return pick, mark, [*(queues or []), limit]


def claim_jobs(model, using: str, worker: str, limit: int, queues: list[str] | None) -> list:
    """Lock up to `limit` due jobs in claim order, mark them RUNNING for `worker`, return them.

    PostgreSQL and SQLite: one ``UPDATE ... WHERE id IN (SELECT ... [FOR UPDATE SKIP
    LOCKED]) RETURNING``; on SQLite the statement itself holds the write lock.
    MySQL/MariaDB have no UPDATE ... RETURNING: SELECT ... FOR UPDATE SKIP LOCKED,
    then UPDATE, in one short transaction.
    """
    connection = connections[using]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in model._meta.concrete_fields)
    pick, mark, pick_params = claim_statements(model, using, limit, queues)
    if connection.vendor != "mysql":
        sql = f"{mark} WHERE id IN ({pick.format(what='id')}) RETURNING {columns}"
        jobs = list(model._base_manager.using(using).raw(sql, [worker, worker, *pick_params]))
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.pk))
        return jobs
    with transaction.atomic(using=using):
        jobs = list(model._base_manager.using(using).raw(pick.format(what=columns), pick_params))
        if jobs:
            with connection.cursor() as cursor:
                marks = ", ".join(["%s"] * len(jobs))
                cursor.execute(f"{mark} WHERE id IN ({marks})", [worker, worker, *(j.pk for j in jobs)])
    for job in jobs:
        job.status, job.worker, job.attempts = "RUNNING", worker, job.attempts + 1
        job.worker_ids = [*job.worker_ids, worker]
    return jobs


def finish_successes(model, using: str, worker: str, done: list) -> set:
    """Mark (job, return value) pairs SUCCESSFUL in one UPDATE, fenced on owner and attempt.

    Return the ids this worker still owned, and so finished.
    """
    connection = connections[using]
    vendor = connection.vendor
    table = connection.ops.quote_name(model._meta.db_table)
    params: list = []
    value_sql = "NULL"
    values = [(job.pk, value) for job, value in done if value is not None]
    if values:
        cast = "::jsonb" if vendor == "postgresql" else ""
        value_sql = "CASE id " + " ".join([f"WHEN %s THEN %s{cast}"] * len(values)) + " ELSE NULL END"
        for pk, value in values:
            params += [pk, json.dumps(value)]
    pairs = ", ".join(["(%s, %s)"] * len(done))
    for job, _value in done:
        params += [job.pk, job.attempts]
    sql = (
        f"UPDATE {table} SET status = 'SUCCESSFUL', finished_at = {NOW_SQL[vendor]},"
        f" active_key = NULL, return_value = {value_sql}"
        f" WHERE worker = %s AND status = 'RUNNING' AND (id, attempts) IN ({pairs})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params[: 2 * len(values)], worker, *params[2 * len(values) :]])
        updated = cursor.rowcount
    if updated == len(done):
        return {job.pk for job, _value in done}
    # Some were lost to a sweep: find which rows this UPDATE finished.
    rows = model._base_manager.using(using).filter(
        pk__in=[job.pk for job, _value in done], worker=worker, status="SUCCESSFUL"
    )
    finished = set(rows.values_list("pk", "attempts"))
    return {job.pk for job, _value in done if (job.pk, job.attempts) in finished}
