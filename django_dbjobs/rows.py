"""Making Job rows and INSERTing them, fast: the hot path of enqueue() and bulk_enqueue().

``Job(**fields)`` looks up every field's default through several layers, and
``Model.save()``/``bulk_create()`` compile the INSERT and prepare every column of
every row anew; for a one-row INSERT that costs more than the database's own work.
Here the SQL is made once per database, row count and shape of row: a column still
at its default (status, attempts, the empty error list, ...) is written into the SQL
as a literal, only the job's own values travel as parameters, and the columns the
database fills in (``run_at``, ``enqueued_at``: the database clock) are read back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connections, transaction
from django.db.models.base import ModelState
from django.db.models.expressions import DatabaseDefault
from django.db.models.signals import post_init, post_save, pre_init, pre_save

from . import db
from .models import Job

_MISSING = object()
_PLAIN = (str, int, type(None))


@dataclass(frozen=True)
class _Field:
    """What rows.py needs to know of one concrete Job field, worked out once."""

    field: Any
    attname: str
    is_json: bool
    # Fresh-value maker for defaults that differ each time or are mutable; else None.
    make: Any
    # The default, where it is the same every time ([] and {} included); else _MISSING.
    default: Any = _MISSING
    # A job left at the default: "p" made anew each time (the id), so a parameter;
    # "d" filled in by the database (run_at, enqueued_at); "c" a constant.
    unset: str = "c"


_fields_cache: list[_Field] = []


def _fields() -> list[_Field]:
    global _fields_cache
    if not _fields_cache:  # built whole, then published: threads may race here harmlessly
        specs = []
        for field in Job._meta.concrete_fields:
            sample = field.get_default()
            made_anew = field.has_default() and callable(field.default) and field.default not in (list, dict)
            if made_anew or field.default in (list, dict):
                make = field.default  # the id maker, or a fresh [] / {}
            elif isinstance(sample, DatabaseDefault | list | dict):
                make = field.get_default
            else:
                make = None
            specs.append(
                _Field(
                    field,
                    field.attname,
                    field.get_internal_type() == "JSONField",
                    make=make,
                    default=_MISSING if made_anew or isinstance(sample, DatabaseDefault) else sample,
                    unset="p" if made_anew else "d" if isinstance(sample, DatabaseDefault) else "c",
                )
            )
        _fields_cache = specs
    return _fields_cache


def build(fields: dict[str, Any], using: str) -> Job:
    """Return ``Job(**fields)``, unsaved and bound to `using`, in a fraction of the time."""
    return build_many(fields, [{}], using)[0]


def build_many(common: dict[str, Any], each: list[dict[str, Any]], using: str) -> list[Job]:
    """Return one unsaved Job per dict in `each`: its fields over the `common` ones."""
    template, fresh, position = [], [], {}
    for index, spec in enumerate(_fields()):
        position[spec.attname] = index
        value = common.get(spec.attname, _MISSING)
        if value is _MISSING:
            if spec.make is not None:
                fresh.append((index, spec.make))
            value = spec.default
        template.append(value)
    # Model.__init__ only sets each field's attribute (no field of Job has a data
    # descriptor) between the init signals; without listeners, do just that.
    plain = not (pre_init.has_listeners(Job) or post_init.has_listeners(Job))
    names = [spec.attname for spec in _fields()]
    jobs = []
    for fields in each:
        values = template.copy()
        for index, make in fresh:
            values[index] = make()
        for name, value in fields.items():
            values[position[name]] = value
        if plain:
            instance = Job.__new__(Job)
            instance.__dict__.update(zip(names, values, strict=True))
            instance._state = ModelState()
        else:
            instance = Job(*values)
        instance._state.db = using
        jobs.append(instance)
    return jobs


def insert(
    instances: list[Job],
    using: str,
    batch_size: int = 1000,
    signals: bool = False,
    given: frozenset | None = None,
    shared: frozenset = frozenset(),
) -> None:
    """INSERT unsaved jobs in as few statements as the database allows; read back its defaults.

    The rows are those ``save(force_insert=True)`` would write. With `signals` (one job
    from enqueue()), Job's save signals are honoured by falling back to save(); the
    bulk path sends none, as ``bulk_create()`` does. MySQL, which cannot return
    columns from an INSERT, goes through ``bulk_create()``. `given` says that every
    job was made by build() or build_many() from values for these fields, so no row
    needs checking for fields changed since; of those, the `shared` ones have the
    same value in every job (sent once, not once per row).
    """
    connection = connections[using]
    if signals and (pre_save.has_listeners(Job) or post_save.has_listeners(Job)):
        for instance in instances:
            instance.save(using=using, force_insert=True)
        return
    if not connection.features.can_return_rows_from_bulk_insert:
        Job.objects.using(using).bulk_create(instances, batch_size=batch_size)
        return
    shapes: dict[tuple, list[Job]] = {}
    if given is not None:
        shapes[_made_shape(given, shared)] = instances
    else:
        for instance in instances:
            shapes.setdefault(_shape(instance), []).append(instance)
    with transaction.mark_for_rollback_on_error(using):
        for shape, group in shapes.items():
            plan = _plan(using, shape, many=len(group) > 1)
            size = batch_size
            if connection.features.max_query_params and plan.slots:
                size = max(1, min(size, connection.features.max_query_params // len(plan.slots)))
            for start in range(0, len(group), size):
                _execute(connection, plan, group[start : start + size])
    for instance in instances:
        instance._state.adding = False
        instance._state.db = using


def _shape(instance: Job) -> tuple:
    """Per field: 'd' filled by the database, 'c' at its constant default, 'p' a
    parameter per row, 's' one parameter shared by all rows."""
    shape = []
    for spec in _fields():
        value = getattr(instance, spec.attname)
        if isinstance(value, DatabaseDefault):
            shape.append("d")
        elif spec.default is not _MISSING and value == spec.default and type(value) is type(spec.default):
            shape.append("c")
        else:
            shape.append("p")
    return tuple(shape)


def _made_shape(given: frozenset, shared: frozenset) -> tuple:
    """The shape of the jobs build() makes from values for the `given` fields."""
    shape = _made_shapes.get((given, shared))
    if shape is None:
        shape = _made_shapes[(given, shared)] = tuple(
            "s" if spec.attname in shared else "p" if spec.attname in given else spec.unset
            for spec in _fields()
        )
    return shape


_made_shapes: dict[tuple, tuple] = {}


@dataclass(frozen=True)
class _Plan:
    head: str  # "INSERT INTO ... (...) VALUES " (or the whole statement, with unnest)
    # One row of VALUES: SQL text, and the fields shared by all rows, whose values are
    # written in as literals: ["(%s, ", <queue>, ", 'READY', 0, ...)"].
    row: list
    tail: str  # " RETURNING ..." or ""
    # The placeholders of one row, in order: (field spec, shared by all rows?).
    slots: list
    returning: list  # (field, converters) of the columns read back
    # PostgreSQL: ``INSERT ... SELECT FROM UNNEST(...)`` with one array parameter per
    # column: a short statement whatever the row count, parsed far faster than long
    # VALUES lists. Shared values come first (the SELECT list), then the arrays.
    unnest: bool = False


_plans: dict[tuple, _Plan] = {}


def _plan(using: str, shape: tuple, many: bool) -> _Plan:
    plan = _plans.get((using, shape, many))
    if plan is not None:
        return plan
    connection = connections[using]
    unnest = many and connection.vendor == "postgresql"
    quote_name = connection.ops.quote_name
    quote = connection.schema_editor().quote_value
    json_placeholder = db.JSON_PLACEHOLDER[connection.vendor]
    columns, values, slots, returning, arrays, shared = [], [], [], [], [], []
    for spec, kind in zip(_fields(), shape, strict=True):
        field = spec.field
        if kind == "d":
            converters = connection.ops.get_db_converters(field.cached_col) + field.get_db_converters(
                connection
            )
            returning.append((field, converters))
            continue
        columns.append(quote_name(field.column))
        if kind == "c":
            values.append(_literal(spec, quote).replace("%", "%%"))
        elif unnest and kind == "p":
            arrays.append(f"%s::{'text' if spec.is_json else field.db_type(connection)}[]")
            values.append(f"c{len(arrays) - 1}" + ("::jsonb" if spec.is_json else ""))
        elif unnest:  # a shared value: one scalar parameter in the SELECT list
            values.append(json_placeholder if spec.is_json else "%s")
            shared.append((spec, True))
        elif kind == "s" and not spec.is_json:  # a shared value: a literal in each row
            values.append(spec)
        else:
            values.append(json_placeholder if spec.is_json else "%s")
            slots.append((spec, kind == "s"))
    table = quote_name(Job._meta.db_table)
    tail = ""
    if returning:
        tail = " RETURNING " + ", ".join(quote_name(field.column) for field, _c in returning)
    head = f"INSERT INTO {table} ({', '.join(columns)}) "
    if unnest:
        specs = [spec for spec, kind in zip(_fields(), shape, strict=True) if kind == "p"]
        names = ", ".join(f"c{n}" for n in range(len(arrays)))
        head += f"SELECT {', '.join(values)} FROM UNNEST({', '.join(arrays)}) AS rows ({names})"
        plan = _Plan(head, [], tail, shared + [(spec, False) for spec in specs], returning, unnest=True)
    else:
        row: list = ["("]
        for n, value in enumerate(values):
            row += [", ", value] if n else [value]
        row.append(")")
        plan = _Plan(head + "VALUES ", row, tail, slots, returning)
    _plans[(using, shape, many)] = plan
    return plan


def _literal(spec: _Field, quote) -> str:
    """SQL text for a constant default: None, an integer, a string, or JSON."""
    value = spec.default
    if value is None:
        return "NULL"
    if spec.is_json:
        return str(quote(json.dumps(value)))
    if isinstance(value, str):
        return str(quote(value))
    return str(int(value))


def _shared_literal(connection, spec: _Field, job: Job, quote) -> str:
    """A value every row shares, as SQL text (a validated name, number or time)."""
    value = _param(connection, spec, getattr(job, spec.attname))
    if value is None:
        return "NULL"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return str(quote(str(value))).replace("%", "%%")


def _param(connection, spec: _Field, value: Any) -> Any:
    if spec.is_json:
        return None if value is None else json.dumps(value)
    if type(value) in _PLAIN:
        return value
    return spec.field.get_db_prep_save(value, connection)


def _execute(connection, plan: _Plan, chunk: list[Job]) -> None:
    first = chunk[0]
    once = {
        spec.attname: _param(connection, spec, getattr(first, spec.attname))
        for spec, same in plan.slots
        if same
    }
    if plan.unnest:
        params = [once[spec.attname] for spec, same in plan.slots if same]
        params += [
            [_param(connection, spec, getattr(job, spec.attname)) for job in chunk]
            for spec, same in plan.slots
            if not same
        ]
        sql = plan.head + plan.tail
    else:
        params = [
            once[spec.attname] if same else _param(connection, spec, getattr(job, spec.attname))
            for job in chunk
            for spec, same in plan.slots
        ]
        quote = connection.schema_editor().quote_value
        row_sql = "".join(
            part if isinstance(part, str) else _shared_literal(connection, part, first, quote)
            for part in plan.row
        )
        sql = plan.head + ", ".join([row_sql] * len(chunk)) + plan.tail
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall() if plan.returning else ()
    if not plan.returning:
        return
    # Rows of one statement mostly share the database clock: convert each value once.
    converted: dict = {}
    for instance, row in zip(chunk, rows, strict=True):
        for (field, converters), raw in zip(plan.returning, row, strict=True):
            key = (field.attname, raw)
            value = converted.get(key, _MISSING)
            if value is _MISSING:
                value = raw
                for converter in converters:
                    value = converter(value, field.cached_col, connection)
                converted[key] = value
            setattr(instance, field.attname, value)
