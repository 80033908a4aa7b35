"""The hot-path SQL of the claim, which differs by database (completions.py finishes jobs).

The claim's row selection is built by the ORM (compiled once per shape); the UPDATE
that marks the rows and the clock are written out by hand: each runs once per batch of
jobs, and the ORM's query building cost more than the database's work for them.
"""

from __future__ import annotations

import contextlib

from django.db import connections, transaction
from django.utils import timezone

from ..conf import settings
from . import direct
from .clock import NOW_SQL
from .index_hints import on_index
from .indexes import ReadyJobsIndex
from .rows_read import jobs_from_cursor, jobs_from_rows

#: worker_ids with one more worker appended (the parameter).
APPEND_SQL = {
    "postgresql": "worker_ids || jsonb_build_array(%s::text)",
    "mysql": "JSON_ARRAY_APPEND(worker_ids, '$', %s)",
    "sqlite": "json_insert(worker_ids, '$[#]', %s)",
}


#: A LIMIT no claim asks for: compiled into the cached claim SQL, then made a parameter,
#: _LIMIT in the cached parameters (a caller's filter value can never be taken for it).
_LIMIT_MARK = 987_654_321
_LIMIT = object()
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

    A shape whose last item is true (``narrowed``: a filtered QuerySet's claim, whose
    filters the shape does not tell apart) is compiled on every call, never cached.
    """
    key = (using, what, shape)
    cached = None if shape[-1] else _claims.get(key)
    if cached is None:
        due = build()
        # The model's default ordering is the claim order (models/states.py CLAIM_ORDER).
        picked = due.order_by(*due.model._meta.ordering).select_for_update(skip_locked=True)[:_LIMIT_MARK]
        if what == "id":
            picked = picked.values_list("pk")
        # select_for_update() may only be compiled inside a transaction; nothing runs (inside
        # the caller's, a savepoint would cost two round trips: a filtered claim compiles
        # on every call).
        connection = connections[using]
        outside = connection.features.has_select_for_update and connection.get_autocommit()
        with transaction.atomic(using=using) if outside else contextlib.nullcontext():
            sql, params = picked.query.get_compiler(using=using).as_sql()
        limit_sql = f"LIMIT {_LIMIT_MARK}"
        if sql.count(limit_sql) != 1:
            raise AssertionError(f"Unexpected claim SQL: {sql}")
        before = sql[: sql.index(limit_sql)]
        position = before.count("%s") - before.count("%%s")
        sql = sql.replace(limit_sql, "LIMIT %s")
        params = [*params[:position], _LIMIT, *params[position:]]
        sql, params = _inline_constants(sql, params, set(values), using, picked.model)
        sql = _pin_claim_index(sql, picked.model, using)
        cached = (sql, params)
        if not shape[-1]:
            _claims[key] = cached
    sql, params = cached
    return sql, [
        limit if value is _LIMIT else values.get(value, value) if type(value) is str else value
        for value in params
    ]


def _pin_claim_index(sql: str, model, using: str) -> str:
    """Name the claim index in the pick: ``INDEXED BY`` on SQLite, ``FORCE INDEX`` on MySQL.

    SQLite: without statistics (Django never runs ANALYZE) it may plan the pick on
    another index led by status and sort every READY row on each claim, under the write
    lock: 100 ms and more with a large backlog, against about 1 ms on the claim index.

    MySQL/MariaDB: with stale statistics (a small or freshly emptied table) the planner
    reads the whole table and sorts (``ALL``, filesort). A locking read that sorts locks
    every row it matched, not only those its LIMIT keeps: one claim held every due job
    until it committed, and the other workers' SKIP LOCKED claims came back empty with
    jobs waiting (seen on MariaDB 10.11). On the index, in claim order, a claim locks
    only the jobs it takes.
    PostgreSQL has no index hints (claim_jobs() says how its plan is kept).
    """
    index = next(index.name for index in model._meta.indexes if isinstance(index, ReadyJobsIndex))
    return on_index(sql, connections[using], model._meta.db_table, index)


def _inline_constants(sql: str, params: list, placeholders: set, using: str, model) -> tuple[str, list]:
    """Write the constants the ORM sent as parameters (the status 'READY') into the SQL.

    As literals they let the planner match the partial claim index (WHERE status =
    'READY') outright, where a bound parameter makes SQLite plan the statement again on
    every claim. Only the job states and isolation values, written in our code: any
    other value (a filtered QuerySet's) stays a parameter. ``blocked = ''`` matches the
    claim index's condition the same way.
    """
    states = ("status", "isolation", "blocked")
    constants = {value for name in states for value, _ in model._meta.get_field(name).choices}
    quote = connections[using].schema_editor().quote_value
    parts = sql.split("%s")
    out, kept = [parts[0]], []
    for param, part in zip(params, parts[1:], strict=True):
        if isinstance(param, str) and param in constants and param not in placeholders:
            out.append(str(quote(param)).replace("%", "%%"))
        else:
            out.append("%s")
            kept.append(param)
        out.append(part)
    return "".join(out), kept


def claim_mark(model, using: str) -> str:
    """The UPDATE that makes picked jobs RUNNING (parameters: the worker twice)."""
    connection = connections[using]
    vendor = connection.vendor
    table = connection.ops.quote_name(model._meta.db_table)
    now = NOW_SQL[vendor]
    return (
        f"UPDATE {table} SET status = 'RUNNING', blocked = '', worker = %s, attempts = attempts + 1,"
        " pickups = pickups + 1,"
        f" started_at = COALESCE(started_at, {now}), last_attempted_at = {now},"
        f" worker_ids = {APPEND_SQL[vendor]}"
    )


def claim_sql(model, using: str, build, shape: tuple, values: dict, worker: str, limit: int):
    """The claim's first statement: (SQL, parameters).

    PostgreSQL and SQLite: the whole claim, ``UPDATE ... WHERE id = ANY(ARRAY(<pick>))
    RETURNING`` (SQLite: ``WHERE id IN (<pick>)``). MySQL/MariaDB (no UPDATE ...
    RETURNING): the pick of every column; claim_jobs() marks the rows after it.
    """
    connection = connections[using]
    if connection.vendor == "mysql":
        return claim_pick(build, shape, using, limit, values, what="*")
    pick, params = claim_pick(build, shape, using, limit, values)
    key = (model, using, pick)
    sql = _claim_statements.get(key)
    if sql is None:
        columns = ", ".join(connection.ops.quote_name(f.column) for f in model._meta.concrete_fields)
        # PostgreSQL: ARRAY() runs the pick once. As ``id IN (<pick>)`` the planner may make a
        # nested-loop semi-join that runs the pick again for each row it updates, each run
        # skipping the rows the last one locked: a claim of 1 took 3 jobs (dead rows and
        # fresh statistics: tests/test_claim_limit.py). SQLite runs an IN list's query once.
        picked = f"= ANY(ARRAY({pick}))" if connection.vendor == "postgresql" else f"IN ({pick})"
        sql = f"{claim_mark(model, using)} WHERE id {picked} RETURNING {columns}"
        if not shape[-1]:  # a filtered QuerySet's: not kept (claim_pick())
            _claim_statements[key] = sql
    return sql, [worker, worker, *params]


_claim_statements: dict[tuple, str] = {}


#: Added to the claim's WHERE on PostgreSQL: its commit does not wait for the WAL flush.
ASYNC_COMMIT = " AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL"


def without_flush(sql: str, keep: bool = True) -> str:
    """PostgreSQL with DBJOBS_ASYNC_CLAIM_COMMIT: the claim (one statement, its own
    transaction) committed without waiting for its WAL flush.

    The flush is a disk write per claim and part of an idle worker's wake-up. Off by
    default: a crash of the database server (or a failover) in the next few hundred
    milliseconds loses the claim, and docs/reliability.rst says what that costs.
    ``set_config(..., true)`` lasts only for this transaction, and is only added when
    autocommit makes the claim its own transaction.
    """
    fast = _async_claims.get(sql)
    if fast is None:
        fast = sql.replace(" RETURNING ", ASYNC_COMMIT + " RETURNING ", 1)
        if keep:
            _async_claims[sql] = fast
    return fast


_async_claims: dict[str, str] = {}


def claim_jobs(
    model, using: str, build, shape: tuple, values: dict, worker: str, limit: int, unsorted=None
) -> list:
    """Lock up to `limit` due jobs in claim order, mark them RUNNING for `worker`, return them.

    PostgreSQL and SQLite: one statement (on PostgreSQL after the planner setting below, in
    the same round trip); on SQLite it holds the write lock itself. MySQL/MariaDB: the
    pick, then UPDATE, in one short transaction.

    The pick reads the claim index in claim order on every database. SQLite names the
    index (``INDEXED BY``), MySQL forces it; PostgreSQL has no index hints, and its
    planner trusts the table's statistics: taken while the queue was near empty, they say
    almost no job is READY, and with a backlog, reading every READY row and sorting them
    then looks cheaper than the ordered index scan, so each claim reads and sorts the
    whole backlog (measured: 100 to 300 ms a claim with 40,000 jobs waiting, against under
    1 ms on the index; 16 workers drained less than half of what 2 did). So the claim is
    planned with ``enable_sort`` off, for that statement alone (direct.run(without_sort=True)),
    which leaves the ordered index scan as its only plan.

    `unsorted` (PostgreSQL): another connection to `using`, in autocommit, whose session has
    ``enable_sort`` off already: the worker's LISTEN connection (listen.py). The claim runs
    there as one statement, without the setting's statement before it in the pipeline.
    """
    connection = unsorted or connections[using]
    sql, params = claim_sql(model, using, build, shape, values, worker, limit)
    narrowed = shape[-1]  # a filtered QuerySet's claim: its SQL neither kept nor prepared
    if connection.vendor == "postgresql" and settings.ASYNC_CLAIM_COMMIT and connection.get_autocommit():
        sql = without_flush(sql, keep=not narrowed)
    if connection.vendor != "mysql":
        without_sort = unsorted is None
        rows = direct.run(connection, sql, params, many=True, without_sort=without_sort, prepare=not narrowed)
        return in_claim_order(jobs_from_rows(model, using, *rows))
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(sql, params)
        jobs = jobs_from_cursor(model, using, cursor)
        if jobs:
            marks = ", ".join(["%s"] * len(jobs))
            cursor.execute(
                f"{claim_mark(model, using)} WHERE id IN ({marks})",
                [worker, worker, *(j.pk for j in jobs)],
            )
    return as_claimed(jobs, worker)


def in_claim_order(jobs: list) -> list:
    """`jobs` sorted as the claim picked them (UPDATE ... RETURNING returns them in any order)."""
    if len(jobs) > 1:
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.pk))
    return jobs


def as_claimed(jobs: list, worker: str) -> list:
    """Jobs read before the UPDATE that claimed them, as it left them."""
    # The UPDATE stamped the times by the database clock; these copies, read before it, get
    # the host's: close enough for what reads them in memory (TaskResult, signals).
    now = timezone.now()
    for job in jobs:
        job.status, job.blocked, job.worker, job.attempts = "RUNNING", "", worker, job.attempts + 1
        job.pickups += 1
        job.worker_ids = [*job.worker_ids, worker]
        job.started_at = job.started_at or now
        job.last_attempted_at = now
    return jobs
