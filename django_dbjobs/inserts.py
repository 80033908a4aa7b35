"""INSERTing Job rows fast: the second half of enqueue()'s hot path (rows.py is the first).

``Model.save()`` and ``bulk_create()`` compile the INSERT and prepare every column of
every row anew; for a one-row INSERT that costs more than the database's own work.
Here the SQL is made once per database, row count and shape of row: a column still
at its default (status, attempts, the empty error list, ...) is written into the SQL
as a literal, only the job's own values travel as parameters (values shared by every
row once), PostgreSQL gets one array per column (``ROWS FROM``), and the columns the database fills in
(``run_at``, ``enqueued_at``: the database clock) are read back with ``RETURNING`` for
one row; for many, the clock is read once and sent as a value every row shares.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connections, transaction
from django.db.models.expressions import DatabaseDefault
from django.db.models.signals import post_save, pre_save

from . import db
from .models import Job
from .rows import MISSING, FieldSpec, field_specs

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
    same value in every job (sent once, not once per row). `texts` (with `given`) holds,
    for JSON fields, each job's value already as JSON text, in the order of `instances`.
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
            if len(group) > 1 and "d" in shape and connection.vendor != "postgresql":
                shape = _clock_once(connection, shape, group)  # PostgreSQL: see _plan()
            plan = _plan(using, shape, many=len(group) > 1)
            if plan.json_rows and not _json_safe(plan, group):
                plan = _plan(using, shape, many=True, json_rows=False)
            size = batch_size
            if connection.features.max_query_params and plan.params and not plan.json_rows:
                size = max(1, min(size, connection.features.max_query_params // len(plan.params)))
            ready = texts if given is not None else None
            for start in range(0, len(group), size):
                _execute(connection, plan, group[start : start + size], ready, start)
    for instance in instances:
        instance._state.adding = False
        instance._state.db = using


def _clock_once(connection, shape: tuple, group: list[Job]) -> tuple:
    """Fill the database-clock columns of many rows from one read of the clock.

    Reading ``run_at`` and ``enqueued_at`` back from every row (``RETURNING``) costs a
    multi-row INSERT about a third of its time; one ``SELECT`` of the clock, sent
    back as a value all rows share, gives the same database time for far less.
    """
    raw = db.database_now(connection.alias)
    filled = []
    for spec, kind in zip(field_specs(), shape, strict=True):
        if kind == "d":
            value = db.as_datetime(raw, spec.field, connection)
            for job in group:
                setattr(job, spec.attname, value)
        filled.append("s" if kind == "d" else kind)
    return tuple(filled)


def _shape(instance: Job) -> tuple:
    """Per field: 'd' filled by the database, 'c' at its constant default, 'p' a
    parameter per row (_made_shape() also knows 's': one value shared by all rows)."""
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


def _made_shape(given: frozenset, shared: frozenset) -> tuple:
    """The shape of the jobs build() makes from values for the `given` fields."""
    shape = _made_shapes.get((given, shared))
    if shape is None:
        shape = _made_shapes[(given, shared)] = tuple(
            "s" if spec.attname in shared else "p" if spec.attname in given else spec.unset
            for spec in field_specs()
        )
    return shape


_made_shapes: dict[tuple, tuple] = {}


@dataclass(frozen=True)
class _Plan:
    head: str  # "INSERT INTO ... (...) VALUES " (or the whole statement, with unnest)
    # One row of VALUES: SQL text, and the fields shared by all rows, whose values are
    # written in as literals: ["(%s, ", <queue spec>, ", 'READY', 0, ...)"].
    row: list
    tail: str  # " RETURNING ..." or ""
    params: list  # the fields sent as a parameter for every row, in order
    returning: list  # (field, converters) of the columns read back
    # PostgreSQL: ``INSERT ... SELECT FROM UNNEST(...)`` with one array parameter per
    # column: a short statement whatever the row count, parsed far faster than long
    # VALUES lists. The values every row shares are scalar parameters before them.
    unnest: bool = False
    shared: list = ()  # with unnest: the fields sent once, as scalar parameters
    # SQLite: ``INSERT ... SELECT ... FROM json_each(%s)``, every row's values in one JSON
    # parameter, `row` the SELECT list: the statement stays short, so parsing it costs
    # next to nothing, where a long VALUES list repeats each constant in every row.
    json_rows: bool = False


_plans: dict[tuple, _Plan] = {}


def _plan(using: str, shape: tuple, many: bool, json_rows: bool = True) -> _Plan:
    plan = _plans.get((using, shape, many, json_rows))
    if plan is not None:
        return plan
    connection = connections[using]
    unnest = many and connection.vendor == "postgresql"
    json_rows = json_rows and many and connection.vendor == "sqlite"
    quote_name = connection.ops.quote_name
    quote = connection.schema_editor().quote_value
    json_placeholder = db.JSON_PLACEHOLDER[connection.vendor]
    columns, values, params, returning, arrays, shared = [], [], [], [], [], []
    for spec, kind in zip(field_specs(), shape, strict=True):
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
        elif kind == "s" and unnest:  # one scalar parameter in the SELECT list
            values.append(json_placeholder if spec.is_json else "%s")
            shared.append(spec)
        elif kind == "s":  # a literal in every row, filled in per statement
            values.append(spec)
        elif unnest:
            # JSON and text columns travel as one JSON array each (made by the json module,
            # in C), not as a PostgreSQL array (quoted element by element in Python).
            name = f"c{len(arrays)}"
            if spec.is_json:
                # A None is SQL NULL, as save() writes it (refused by a NOT NULL column).
                arrays.append("jsonb_array_elements(%s::jsonb)")
                values.append(f"NULLIF({name}, 'null'::jsonb)")
            elif spec.is_text:
                arrays.append("jsonb_array_elements_text(%s::jsonb)")
                values.append(name)
            else:
                arrays.append(f"UNNEST(%s::{field.db_type(connection)}[])")
                values.append(name)
            params.append(spec)
        elif json_rows:  # a JSON field's value travels as its JSON text, a string
            values.append(f"json_extract(value, '$[{len(params)}]')")
            params.append(spec)
        else:
            values.append(json_placeholder if spec.is_json else "%s")
            params.append(spec)
    table = quote_name(Job._meta.db_table)
    tail = ""
    if returning:
        tail = " RETURNING " + ", ".join(quote_name(field.column) for field, _c in returning)
    head = f"INSERT INTO {table} ({', '.join(columns)}) "
    if unnest:
        names = ", ".join(f"c{n}" for n in range(len(arrays)))
        head += f"SELECT {', '.join(values)} FROM ROWS FROM ({', '.join(arrays)}) AS rows ({names})"
        if returning:
            # The database clock of every row is its statement's: read it back once, not
            # per row, and in the same round trip (a data-modifying WITH always completes).
            cols = ", ".join(quote_name(field.column) for field, _c in returning)
            head = f"WITH inserted AS ({head}"
            tail = f"{tail}) SELECT {cols} FROM inserted LIMIT 1"
        plan = _Plan(head, [], tail, params, returning, unnest=True, shared=shared)
    elif json_rows:
        select: list = []
        for n, value in enumerate(values):
            select += [", ", value] if n else [value]
        tail = " FROM json_each(%s)" + tail
        plan = _Plan(head + "SELECT ", select, tail, params, returning, json_rows=True)
    else:
        row: list = ["("]
        for n, value in enumerate(values):
            row += [", ", value] if n else [value]
        row.append(")")
        if all(isinstance(part, str) for part in row):
            row = ["".join(row)]
        plan = _Plan(head + "VALUES ", row, tail, params, returning)
    _plans[(using, shape, many, json_rows)] = plan
    return plan


def _json_safe(plan: _Plan, group: list[Job]) -> bool:
    """Whether SQLite's JSON functions give back every per-row value of `group` unchanged.

    A JSON field's value travels as its JSON text, a plain string: always. A text value
    with a NUL (SQLite before 3.45 cuts the string there) or a lone surrogate, or an
    integer beyond 64 bits, does not: those rows go in as a VALUES list instead.
    """
    for spec in plan.params:
        if spec.is_json:
            continue
        for job in group:
            value = getattr(job, spec.attname)
            if type(value) is str:
                if "\x00" in value or (not value.isascii() and not _encodable(value)):
                    return False
            elif type(value) is int and not -(2**63) <= value < 2**63:
                return False
    return True


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _literal(spec: FieldSpec, quote) -> str:
    """SQL text for a constant default: None, an integer, a string, or JSON."""
    value = spec.default
    if value is None:
        return "NULL"
    if spec.is_json:
        return str(quote(json.dumps(value)))
    if isinstance(value, str):
        return str(quote(value))
    return str(int(value))


def _shared_literal(connection, spec: FieldSpec, job: Job, quote) -> str:
    """A value every row shares, as SQL text (a validated name, number or time)."""
    value = _param(connection, spec, getattr(job, spec.attname))
    if value is None:
        return "NULL"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return str(quote(str(value))).replace("%", "%%")


def _param(connection, spec: FieldSpec, value: Any) -> Any:
    if spec.is_json:
        return None if value is None else json.dumps(value)
    if type(value) in _PLAIN:
        return value
    return spec.field.get_db_prep_save(value, connection)


def _column(connection, spec: FieldSpec, chunk: list[Job], texts: dict | None, start: int) -> Any:
    """PostgreSQL: one column of a chunk as the parameter _plan() expects (see there)."""
    if spec.is_json:
        if texts and spec.attname in texts:
            return f"[{','.join(texts[spec.attname][start : start + len(chunk)])}]"
        return json.dumps([getattr(job, spec.attname) for job in chunk])
    if spec.is_text:
        values = [getattr(job, spec.attname) for job in chunk]
        # Characters as they are, not \u escapes: jsonb refuses those above U+007F when
        # the server's encoding is not UTF8; the text itself goes through the client's.
        return json.dumps(
            [v if type(v) in _PLAIN else _param(connection, spec, v) for v in values], ensure_ascii=False
        )
    return [_param(connection, spec, getattr(job, spec.attname)) for job in chunk]


#: Largest JSON array text of one statement's parameter: a PostgreSQL jsonb value holds at
#: most 256 MiB (of its binary form, larger than the text for small elements), a SQLite
#: string 1 GB, and a chunk of jobs near DBJOBS_MAX_PAYLOAD_BYTES can exceed either.
MAX_ARRAY_TEXT = 32 * 1024 * 1024


def _execute(connection, plan: _Plan, chunk: list[Job], texts: dict | None = None, start: int = 0) -> None:
    first = chunk[0]
    if plan.unnest:
        columns = [_column(connection, spec, chunk, texts, start) for spec in plan.params]
        if len(chunk) > 1 and any(isinstance(c, str) and len(c) > MAX_ARRAY_TEXT for c in columns):
            half = len(chunk) // 2
            _execute(connection, plan, chunk[:half], texts, start)
            _execute(connection, plan, chunk[half:], texts, start + half)
            return
        params = [_param(connection, spec, getattr(first, spec.attname)) for spec in plan.shared]
        params += columns
        sql = plan.head + plan.tail
    else:
        columns = [
            texts[spec.attname][start : start + len(chunk)]
            if texts and spec.attname in texts
            else [_param(connection, spec, getattr(job, spec.attname)) for job in chunk]
            for spec in plan.params
        ]
        if len(plan.row) == 1:  # nothing shared written in: the row is fixed text
            row_sql = plan.row[0]
        else:
            quote = connection.schema_editor().quote_value
            row_sql = "".join(
                part if isinstance(part, str) else _shared_literal(connection, part, first, quote)
                for part in plan.row
            )
        if plan.json_rows:
            text = json.dumps(list(zip(*columns, strict=True)))
            if len(chunk) > 1 and len(text) > MAX_ARRAY_TEXT:
                half = len(chunk) // 2
                _execute(connection, plan, chunk[:half], texts, start)
                _execute(connection, plan, chunk[half:], texts, start + half)
                return
            params = [text]
            sql = plan.head + row_sql + plan.tail
        else:
            params = [value for row in zip(*columns, strict=True) for value in row]
            sql = plan.head + ", ".join([row_sql] * len(chunk)) + plan.tail
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if not plan.returning:
            return
        rows = cursor.fetchall()
    if plan.unnest:  # the one clock of the statement (see _plan())
        rows = rows * len(chunk)
    for instance, row in zip(chunk, rows, strict=True):
        for (field, converters), value in zip(plan.returning, row, strict=True):
            for converter in converters:
                value = converter(value, field.cached_col, connection)
            setattr(instance, field.attname, value)
