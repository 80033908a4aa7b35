"""Everything that differs by database, and nothing else.

Each helper says which databases need it and why. Everything outside this module
asks these helpers (or Django's feature flags) instead of looking at the vendor.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import sqlite3

from django.db import connections, models, transaction
from django.db.models import Q
from django.db.models.functions import Now

from ..exceptions import UnsupportedDatabase
from .errors import ErrorKind, classify

__all__ = ["ErrorKind", "error_kind"]

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


def error_kind(exc: BaseException, using: str = "default") -> ErrorKind:
    """Whether `exc` is an outage (wait it out), bad data (fail one job) or a setup error."""
    return classify(exc, connections[using].vendor)


def pending_migrations(using: str = "default") -> list[str]:
    """The django_dbjobs migrations not yet applied to this database."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[using])
    targets = [key for key in executor.loader.graph.leaf_nodes() if key[0] == "django_dbjobs"]
    plan = executor.migration_plan(targets)
    return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan if not backwards]


def can_skip_locked(using: str = "default") -> bool:
    """True where row locks with SKIP LOCKED exist (PostgreSQL, MySQL 8, MariaDB 10.6+)."""
    return connections[using].features.has_select_for_update_skip_locked


def ensure_supported(using: str = "default") -> None:
    """Raise UnsupportedDatabase where concurrent workers would be unsafe or stall."""
    reason = unsupported_reason(using)
    if reason is not None:
        raise UnsupportedDatabase(reason)


#: SQLite gained UPDATE ... RETURNING, which the claim needs, in 3.35.
MIN_SQLITE_VERSION = (3, 35)


def unsupported_reason(using: str = "default") -> str | None:
    """Why workers cannot run safely on this database, or None.

    MySQL before 8.0.1 and MariaDB before 10.6 accept FOR UPDATE but not SKIP LOCKED,
    so workers would queue behind each other's locks; SQLite before 3.35 has no
    RETURNING, which the claim needs.
    """
    connection = connections[using]
    if connection.vendor == "sqlite" and sqlite_version() < MIN_SQLITE_VERSION:
        return (
            f"SQLite {'.'.join(map(str, sqlite_version()))} has no UPDATE ... RETURNING; django_dbjobs needs "
            f"SQLite {'.'.join(map(str, MIN_SQLITE_VERSION))} or newer."
        )
    if connection.features.has_select_for_update and not can_skip_locked(using):
        connection.ensure_connection()
        return (
            f"{connection.display_name} {connection.get_database_version()} has no "
            "SELECT ... FOR UPDATE SKIP LOCKED; django_dbjobs needs PostgreSQL, "
            "MySQL 8.0.1+ or MariaDB 10.6+."
        )
    return None


def sqlite_version() -> tuple[int, ...]:
    """The version of the SQLite library Python's sqlite3 module uses."""
    return sqlite3.sqlite_version_info


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


#: A LIMIT no claim asks for: compiled into the cached claim SQL, then made a parameter.
_LIMIT_MARK = 987_654_321
_claims: dict[tuple, tuple[str, list]] = {}


def claim_pick(
    build, shape: tuple, using: str, limit: int, values: dict[str, object], what: str = "id"
) -> tuple[str, list]:
    """The claim's row selection, built by the ORM: (SQL, parameters).

    `build()` returns the due jobs to pick from (``Job.objects.due().for_queues(...)``)
    made with placeholder values, the same for every claim of this `shape`; it is
    ordered in claim order, locked with ``FOR UPDATE SKIP LOCKED`` where rows can be
    locked (Django leaves the lock out on SQLite), limited, and compiled once per
    shape. `values` maps each placeholder to this claim's value. `what` is "id", or
    "*" for every column (MySQL).
    """
    key = (using, what, shape)
    cached = _claims.get(key)
    if cached is None:
        from ..models.job import CLAIM_ORDER

        picked = build().order_by(*CLAIM_ORDER).select_for_update(skip_locked=True)[:_LIMIT_MARK]
        if what == "id":
            picked = picked.values_list("pk")
        # select_for_update() may only be compiled inside a transaction; nothing runs.
        locks = connections[using].features.has_select_for_update
        with transaction.atomic(using=using) if locks else contextlib.nullcontext():
            sql, params = picked.query.sql_with_params()
        limit_sql = f"LIMIT {_LIMIT_MARK}"
        if sql.count(limit_sql) != 1:
            raise AssertionError(f"Unexpected claim SQL: {sql}")
        before = sql[: sql.index(limit_sql)]
        position = before.count("%s") - before.count("%%s")
        sql = sql.replace(limit_sql, "LIMIT %s")
        cached = _claims[key] = (sql, [*params[:position], _LIMIT_MARK, *params[position:]])
    sql, params = cached
    marks = {**values, _LIMIT_MARK: limit}
    return sql, [marks.get(value, value) if isinstance(value, str | int) else value for value in params]


def claim_mark(model, using: str) -> str:
    """The UPDATE that makes picked jobs RUNNING (parameters: the worker twice)."""
    connection = connections[using]
    vendor = connection.vendor
    table = connection.ops.quote_name(model._meta.db_table)
    now = NOW_SQL[vendor]
    return (
        f"UPDATE {table} SET status = 'RUNNING', worker = %s, attempts = attempts + 1,"
        " pickups = pickups + 1,"
        f" started_at = COALESCE(started_at, {now}), last_attempted_at = {now},"
        f" worker_ids = {APPEND_SQL[vendor]}"
    )


def claim_sql(model, using: str, build, shape: tuple, values: dict, worker: str, limit: int):
    """The claim's first statement: (SQL, parameters).

    PostgreSQL and SQLite: the whole claim, ``UPDATE ... WHERE id IN (<pick>)
    RETURNING``. MySQL/MariaDB (no UPDATE ... RETURNING): the pick of every column;
    claim_jobs() marks the rows after it.
    """
    connection = connections[using]
    if connection.vendor == "mysql":
        return claim_pick(build, shape, using, limit, values, what="*")
    columns = ", ".join(connection.ops.quote_name(f.column) for f in model._meta.concrete_fields)
    pick, params = claim_pick(build, shape, using, limit, values)
    return f"{claim_mark(model, using)} WHERE id IN ({pick}) RETURNING {columns}", [worker, worker, *params]


def claim_jobs(model, using: str, build, shape: tuple, values: dict, worker: str, limit: int) -> list:
    """Lock up to `limit` due jobs in claim order, mark them RUNNING for `worker`, return them.

    PostgreSQL and SQLite: one statement; on SQLite it holds the write lock itself.
    MySQL/MariaDB: the pick, then UPDATE, in one short transaction.
    """
    connection = connections[using]
    sql, params = claim_sql(model, using, build, shape, values, worker, limit)
    manager = model._base_manager.using(using)
    if connection.vendor != "mysql":
        jobs = list(manager.raw(sql, params))
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.pk))
        return jobs
    with transaction.atomic(using=using):
        jobs = list(manager.raw(sql, params))
        if jobs:
            with connection.cursor() as cursor:
                marks = ", ".join(["%s"] * len(jobs))
                cursor.execute(
                    f"{claim_mark(model, using)} WHERE id IN ({marks})",
                    [worker, worker, *(j.pk for j in jobs)],
                )
    for job in jobs:
        job.status, job.worker, job.attempts = "RUNNING", worker, job.attempts + 1
        job.pickups += 1
        job.worker_ids = [*job.worker_ids, worker]
    return jobs


class WithoutLastWorker(models.Func):
    """``worker_ids`` without its last entry: a refunded pickup leaves no worker id behind."""

    output_field = models.JSONField()

    def __init__(self):
        super().__init__(models.F("worker_ids"))

    def as_sql(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.source_expressions[0])
        template = {
            "postgresql": "({} - (-1))",  # jsonb minus an index; negative counts from the end
            "mysql": "JSON_REMOVE({}, '$[last]')",  # MySQL 8, MariaDB 10.9+
            "sqlite": "json_remove({}, '$[#-1]')",
        }[connection.vendor]
        return template.format(column), params


def finish_successes(model, using: str, worker: str, done: list) -> set:
    """Mark (job, return value) pairs SUCCESSFUL in one UPDATE, fenced on owner and pickup.

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
        params += [job.pk, job.pickups]
    sql = (
        f"UPDATE {table} SET status = 'SUCCESSFUL', finished_at = {NOW_SQL[vendor]},"
        f" active_key = NULL, isolation = '', return_value = {value_sql}"
        f" WHERE worker = %s AND status = 'RUNNING' AND (id, pickups) IN ({pairs})"
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
    finished = set(rows.values_list("pk", "pickups"))
    return {job.pk for job, _value in done if (job.pk, job.pickups) in finished}
