"""The hot-path SQL that finishes and gives back jobs: batched completion, refunds (claims.py claims)."""

from __future__ import annotations

import json

from django.db import connections, models

from .clock import NOW_SQL


class WithoutLastWorker(models.Func):
    """``worker_ids`` without its last entry: a refunded pickup leaves no worker id behind."""

    output_field = models.JSONField()

    def __init__(self):
        super().__init__(models.F("worker_ids"))

    def as_sql(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.source_expressions[0])
        template = {
            "postgresql": "({} - (-1))",  # jsonb minus an index; negative counts from the end
            # '$[last]' needs MariaDB 10.9; this path works from 10.6 (and on MySQL 8).
            "mysql": "JSON_REMOVE({0}, CONCAT('$[', GREATEST(JSON_LENGTH({0}) - 1, 0), ']'))",
            "sqlite": "json_remove({}, '$[#-1]')",
        }[connection.vendor]
        return template.format(column), params


def finish_successes(model, using: str, worker: str, done: list, without_dependents: bool = False) -> set:
    """Mark (job, return value) pairs SUCCESSFUL in one UPDATE, fenced on owner and pickup.

    Return the ids this worker still owned, and so finished. `without_dependents` fences on
    ``has_dependents = FALSE`` too (models/settling.py: a job others wait for finishes
    with their bookkeeping).
    """
    connection = connections[using]
    sql, params = _success_update(connection, model, worker, done, without_dependents)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        updated = cursor.rowcount
    if updated == len(done):
        return {job.pk for job, _value in done}
    # Some were lost to a sweep: find which rows this UPDATE finished.
    rows = model._base_manager.using(using).filter(
        pk__in=[job.pk for job, _value in done], worker=worker, status="SUCCESSFUL"
    )
    finished = set(rows.values_list("pk", "pickups"))
    return {job.pk for job, _value in done if (job.pk, job.pickups) in finished}


def _success_update(connection, model, worker: str, done: list, without_dependents: bool) -> tuple[str, list]:
    """The UPDATE of finish_successes(), and its parameters.

    A job's last progress report not stored yet (LongWork.final_progress()) is stored
    with its outcome, in the same statement.
    """
    vendor = connection.vendor
    table = connection.ops.quote_name(model._meta.db_table)
    cast = "::jsonb" if vendor == "postgresql" else ""
    set_params: list = []
    values = [(job.pk, value) for job, value in done if value is not None]
    value_sql = _json_by_id(values, cast, set_params, "NULL")
    reports = [(job.pk, final["progress_state"]) for job, _value in done if (final := job.final_progress())]
    progress_sql = ""
    if reports:
        progress_sql = ", progress_state = " + _json_by_id(reports, cast, set_params, "progress_state")
    pairs = ", ".join(["(%s, %s)"] * len(done))
    where_params: list = [worker]
    by_key = ""
    if vendor == "mysql":
        # The ids alone too: InnoDB then reads these rows by primary key. Left to pick the
        # running-jobs index, it locks every running job of this worker as it scans them,
        # and waits for one whose own transaction holds its row (a checkpoint() in
        # transaction.atomic()): every success of the worker would wait with it.
        by_key = f" AND id IN ({', '.join(['%s'] * len(done))})"
        where_params += [job.pk for job, _value in done]
    for job, _value in done:
        where_params += [job.pk, job.pickups]
    sql = (
        f"UPDATE {table} SET status = 'SUCCESSFUL', finished_at = {NOW_SQL[vendor]},"
        f" active_key = NULL, isolation = '', return_value = {value_sql}{progress_sql}"
        f" WHERE worker = %s AND status = 'RUNNING'{by_key} AND (id, pickups) IN ({pairs})"
        + (" AND has_dependents = FALSE" if without_dependents else "")
    )
    return sql, [*set_params, *where_params]


def _json_by_id(values: list, cast: str, params: list, default: str) -> str:
    """``CASE id WHEN ... THEN <json> ... ELSE <default> END`` for (id, JSON data) pairs; its
    parameters are added to `params`."""
    if not values:
        return default
    for pk, value in values:
        params += [pk, json.dumps(value)]
    return "CASE id " + " ".join([f"WHEN %s THEN %s{cast}"] * len(values)) + f" ELSE {default} END"


def finish_workflow_successes(model, using: str, worker: str, done: list) -> dict:
    """finish_successes() for jobs of workflows, inside the caller's transaction: return
    {id: has_dependents} of exactly the rows this call changed (their bookkeeping counts them).

    PostgreSQL and SQLite say so with ``RETURNING``. MySQL/MariaDB cannot return rows from
    an UPDATE: the rows still this worker's, at the pickups given, are locked and read
    first, then finished. A batch stored again after a lost commit answer changes nothing,
    so it counts nothing.
    """
    connection = connections[using]
    if connection.vendor == "mysql":
        owned = (
            model._base_manager.using(using)
            .select_for_update()
            .filter(pk__in=[job.pk for job, _value in done], worker=worker, status="RUNNING")
            .order_by("pk")
            .values_list("pk", "pickups", "has_dependents")
        )
        flags = {pk: (pickups, dependents) for pk, pickups, dependents in owned}
        mine = [(job, value) for job, value in done if flags.get(job.pk, (None,))[0] == job.pickups]
        if mine:
            finish_successes(model, using, worker, mine)
        return {job.pk: bool(flags[job.pk][1]) for job, _value in mine}
    sql, params = _success_update(connection, model, worker, done, without_dependents=False)
    with connection.cursor() as cursor:
        cursor.execute(sql + " RETURNING id, has_dependents", params)
        return {pk: bool(dependents) for pk, dependents in cursor.fetchall()}
