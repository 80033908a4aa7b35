"""INSERTing Job rows fast: the second half of enqueue()'s hot path (rows.py is the first).

``Model.save()`` and ``bulk_create()`` compile the INSERT and prepare every column of
every row anew; for a one-row INSERT that costs more than the database's own work.
Here the SQL is made once per database, row count and shape of row (insert_sql.py; many
rows on PostgreSQL go in by COPY instead, copy_rows.py): a
column still at its default (status, attempts, the empty error list, ...) is written into
the SQL as a literal, only the job's own values travel as parameters (values shared by
every row once per statement), and the columns the database fills in (``run_at``,
``enqueued_at``: the database clock) are read back with ``RETURNING`` for one row; for
many, the clock is read once (PostgreSQL: in the same statement).
"""

from __future__ import annotations

import json
import operator
from typing import Any

from django.db import connections, transaction
from django.db.models.expressions import DatabaseDefault
from django.db.models.signals import post_save, pre_save

from ..models import Job
from ..signals import has_receivers
from . import copy_rows, insert_sql
from .clock_once import fill_clock
from .rows import MISSING, FieldSpec, field_specs, made_as_built

_PLAIN = (str, int, type(None))


def insert(
    instances: list[Job],
    using: str,
    batch_size: int = 1000,
    signals: bool = False,
    given: frozenset | None = None,
    shared: frozenset = frozenset(),
    texts: dict[str, list[str]] | None = None,
) -> None:
    """INSERT unsaved jobs in as few statements as the database allows; read back its defaults.

    The rows are those ``save(force_insert=True)`` would write. With `signals` (one job
    from enqueue()), Job's save signals are honoured by falling back to save(); the
    bulk path sends none, as ``bulk_create()`` does. MySQL, which cannot return
    columns from an INSERT, goes through ``bulk_create()``. `given` says that every
    job was made by build() or build_many() from values for these fields, so no row
    needs checking for fields changed since; of those, the `shared` ones have the
    same value in every job (sent once per statement, not once per row). `texts` (with `given`) holds,
    for JSON fields, each job's value already as JSON text, in the order of `instances`.
    """
    connection = connections[using]
    if signals and save_receivers():
        for instance in instances:
            instance.save(using=using, force_insert=True)
        return
    if not connection.features.can_return_rows_from_bulk_insert:
        Job.objects.using(using).bulk_create(instances, batch_size=batch_size)
        return
    shapes: dict[tuple, list[Job]] = {}
    if given is not None:
        shapes[made_shape(given, shared)] = instances
    else:
        for instance in instances:
            made = made_as_built(instance)  # prepare()'s jobs, unchanged: known without a look
            shape = _shape(instance) if made is None else made_shape(made, frozenset())
            shapes.setdefault(shape, []).append(instance)
    with transaction.mark_for_rollback_on_error(using):
        for shape, group in shapes.items():
            if copy_rows.usable(connection, len(group)):
                if "d" in shape:
                    shape = fill_clock(connection, shape, group)
                copy_rows.copy(connection, shape, [group], texts if given is not None else None, db_param)
                continue
            if len(group) > 1 and "d" in shape and connection.vendor != "postgresql":
                shape = fill_clock(connection, shape, group)  # PostgreSQL: see insert_sql.plan()
            plan = insert_sql.plan(using, shape, many=len(group) > 1)
            # Values build() made here (the ids) are plain ASCII: only the given ones need a look.
            made = frozenset() if given is None else frozenset(spec.attname for spec in field_specs()) - given
            if plan.json_rows and not insert_sql.json_safe(plan, group, skip=made):
                plan = insert_sql.plan(using, shape, many=True, json_rows=False)
            size = batch_size
            if connection.features.max_query_params and plan.params and not plan.json_rows:
                size = max(1, min(size, connection.features.max_query_params // len(plan.params)))
            ready = texts if given is not None else None
            for start in range(0, len(group), size):
                _execute(connection, plan, group[start : start + size], ready, start)
    stored(instances, using)


def stored(instances: list[Job], using: str) -> None:
    """Mark `instances` as rows of `using`, as save() leaves a job it inserted."""
    for instance in instances:
        instance._state.adding = False
        instance._state.db = using


def save_receivers() -> bool:
    """Whether Job's save signals have receivers (then a job from enqueue() is saved by save())."""
    return has_receivers(Job, pre_save, post_save)


def _shape(instance: Job) -> tuple:
    """Per field: 'd' filled by the database, 'c' at its constant default, 'p' a
    parameter per row (made_shape() also knows 's': one value shared by all rows)."""
    shape = []
    for spec in field_specs():
        value = getattr(instance, spec.attname)
        if isinstance(value, DatabaseDefault):
            shape.append("d")
        elif spec.default is not MISSING and value == spec.default and type(value) is type(spec.default):
            shape.append("c")
        else:
            shape.append("p")
    return tuple(shape)


def made_shape(given: frozenset, shared: frozenset) -> tuple:
    """The shape of the jobs build() makes from values for the `given` fields."""
    shape = _made_shapes.get((given, shared))
    if shape is None:
        shape = _made_shapes[(given, shared)] = tuple(
            "s" if spec.attname in shared else "p" if spec.attname in given else spec.unset
            for spec in field_specs()
        )
    return shape


_made_shapes: dict[tuple, tuple] = {}


def _driver_literal(connection):
    """MySQL: a value as MySQLdb writes a parameter into a statement (its literal()), ``%``
    doubled as the statement is formatted with the parameters after."""
    raw = connection.connection

    def literal(value: Any) -> str:
        text = raw.literal(value)
        return (text.decode() if isinstance(text, bytes) else text).replace("%", "%%")

    return literal


def db_param(connection, spec: FieldSpec, value: Any) -> Any:
    if spec.is_json:
        return None if value is None else json.dumps(value)
    if type(value) in _PLAIN:
        return value
    return spec.field.get_db_prep_save(value, connection)


def _values(connection, spec: FieldSpec, chunk: list[Job]) -> list:
    """One column of a chunk, each value as a parameter (text as it is: no call per row)."""
    values = list(map(operator.attrgetter(spec.attname), chunk))
    if spec.is_text:
        return [v if type(v) in _PLAIN else db_param(connection, spec, v) for v in values]
    return [db_param(connection, spec, v) for v in values]


def _column(connection, spec: FieldSpec, chunk: list[Job], texts: dict | None, start: int) -> Any:
    """PostgreSQL: one column of a chunk as the parameter insert_sql.plan() expects (see there)."""
    if spec.is_json:
        if texts and spec.attname in texts:
            return f"[{','.join(texts[spec.attname][start : start + len(chunk)])}]"
        return json.dumps([getattr(job, spec.attname) for job in chunk])
    if spec.is_text:
        values = [getattr(job, spec.attname) for job in chunk]
        # Characters as they are, not \u escapes: jsonb refuses those above U+007F when
        # the server's encoding is not UTF8; the text itself goes through the client's.
        return json.dumps(
            [v if type(v) in _PLAIN else db_param(connection, spec, v) for v in values], ensure_ascii=False
        )
    return [db_param(connection, spec, getattr(job, spec.attname)) for job in chunk]


#: Largest JSON array text of one statement's parameter: a PostgreSQL jsonb value holds at
#: most 256 MiB (of its binary form, larger than the text for small elements), a SQLite
#: string 1 GB, and a chunk of jobs near DBJOBS_MAX_PAYLOAD_BYTES can exceed either.
MAX_ARRAY_TEXT = 32 * 1024 * 1024


def _execute(
    connection, plan: insert_sql.Plan, chunk: list[Job], texts: dict | None = None, start: int = 0
) -> None:
    first = chunk[0]
    if plan.unnest:
        params = [db_param(connection, spec, getattr(first, spec.attname)) for spec in plan.shared]
        params += [_column(connection, spec, chunk, texts, start) for spec in plan.params]
        sql = plan.head + plan.tail
    else:
        columns = [
            texts[spec.attname][start : start + len(chunk)]
            if texts and spec.attname in texts
            else _values(connection, spec, chunk)
            for spec in plan.params
        ]
        if len(plan.row) == 1:  # nothing written in per statement: the row is fixed text
            row_sql = plan.row[0]
        else:
            literal = _driver_literal(connection)
            row_sql = "".join(
                part
                if isinstance(part, str)
                else literal(db_param(connection, part, getattr(first, part.attname)))
                for part in plan.row
            )
        if plan.json_rows:
            params = [db_param(connection, spec, getattr(first, spec.attname)) for spec in plan.shared]
            params.append(json.dumps(list(zip(*columns, strict=True))))
            sql = plan.head + row_sql + plan.tail
        else:
            params = [value for row in zip(*columns, strict=True) for value in row]
            sql = plan.head + ", ".join([row_sql] * len(chunk)) + plan.tail
    if (plan.unnest or plan.json_rows) and len(chunk) > 1:
        if any(isinstance(param, str) and len(param) > MAX_ARRAY_TEXT for param in params):
            half = len(chunk) // 2  # one JSON text too large for the database: halve the chunk
            _execute(connection, plan, chunk[:half], texts, start)
            _execute(connection, plan, chunk[half:], texts, start + half)
            return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if not plan.returning:
            return
        rows = cursor.fetchall()
    if plan.unnest:  # the one clock of the statement (see insert_sql.plan())
        rows = rows * len(chunk)
    for instance, row in zip(chunk, rows, strict=True):
        set_returned(connection, instance, plan.returning, row)


def set_returned(connection, instance: Job, returning: list, row) -> None:
    """Set the columns an INSERT read back (``RETURNING``): (field, converters) and their values.

    A value read back twice with the same converters (``run_at`` and ``enqueued_at`` are
    the same database clock) is converted once (on SQLite, a parse of its text).
    """
    last = None
    for (field, converters), value in zip(returning, row, strict=True):
        if last is not None and type(last[0]) is type(value) and last[0] == value and last[1] == converters:
            setattr(instance, field.attname, last[2])
            continue
        raw = value
        for converter in converters:
            value = converter(value, field.cached_col, connection)
        last = (raw, converters, value)
        setattr(instance, field.attname, value)
