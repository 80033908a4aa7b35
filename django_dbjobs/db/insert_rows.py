"""Running insert_sql.py's statements: rows as parameters, in chunks, and the columns read back.

Each row's values become parameters, in chunks the database takes; what ``RETURNING``
reads back is set on the instances. enqueuing/inserts.py decides which rows go in
together and how (shape, clock, COPY); insert() here writes one such group.
"""

from __future__ import annotations

import json
import operator
from typing import Any

from . import direct, insert_sql

_PLAIN = (str, int, type(None))


def insert(
    connection,
    model,
    specs: list,
    shape: tuple,
    group: list,
    batch_size: int,
    texts: dict | None,
    made: frozenset,
) -> None:
    """INSERT the unsaved instances of `group`, all of `shape` (see insert_sql.plan()), at most
    `batch_size` a statement (fewer where the database limits the parameters); read back
    what the database filled in. `texts` holds, for JSON fields, each instance's value
    already as JSON text, in the order of `group`; `made` names the fields whose values
    this package made (plain ASCII: json_safe() need not look at them).
    """
    using = connection.alias
    plan = insert_sql.plan(using, model, specs, shape, many=len(group) > 1)
    if plan.json_rows and not insert_sql.json_safe(plan, group, skip=made):
        plan = insert_sql.plan(using, model, specs, shape, many=True, json_rows=False)
    size = batch_size
    if connection.features.max_query_params and plan.params and not plan.json_rows:
        size = max(1, min(size, connection.features.max_query_params // len(plan.params)))
    for start in range(0, len(group), size):
        _execute(connection, plan, group[start : start + size], texts, start)


def _driver_literal(connection):
    """MySQL: a value as MySQLdb writes a parameter into a statement (its literal()), ``%``
    doubled as the statement is formatted with the parameters after."""
    raw = connection.connection

    def literal(value: Any) -> str:
        text = raw.literal(value)
        return (text.decode() if isinstance(text, bytes) else text).replace("%", "%%")

    return literal


def db_param(connection, spec, value: Any) -> Any:
    """`value` of the field `spec` describes as the parameter the INSERT sends (JSON as its text)."""
    if spec.is_json:
        return None if value is None else json.dumps(value)
    if type(value) in _PLAIN:
        return value
    return spec.field.get_db_prep_save(value, connection)


def _values(connection, spec, chunk: list) -> list:
    """One column of a chunk, each value as a parameter (text as it is: no call per row)."""
    values = list(map(operator.attrgetter(spec.attname), chunk))
    if spec.is_text:
        return [v if type(v) in _PLAIN else db_param(connection, spec, v) for v in values]
    return [db_param(connection, spec, v) for v in values]


def _column(connection, spec, chunk: list, texts: dict | None, start: int) -> Any:
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


def one_statement(connection, rows: int, batch_size: int, texts: list[str]) -> bool:
    """Whether `rows` new jobs (at most `batch_size` a statement; `texts`, their args as JSON
    text) go in by one INSERT, in the caller's autocommit: a transaction of its own.

    PostgreSQL (insert_sql.plan()'s arrays) while no array's text passes MAX_ARRAY_TEXT (an
    id's JSON text is under 64 characters; shared values are scalars), and MySQL/MariaDB (a
    VALUES list of up to `batch_size` rows, or bulk_create()'s). Not SQLite, where the rows
    may be split into statements by value (json_safe()) and a round trip costs nothing.
    """
    if rows > batch_size or not connection.get_autocommit():
        return False
    if connection.vendor == "mysql":
        return True
    if connection.vendor != "postgresql":
        return False
    return rows * 64 <= MAX_ARRAY_TEXT and sum(map(len, texts)) + rows + 1 <= MAX_ARRAY_TEXT


def _execute(
    connection, plan: insert_sql.Plan, chunk: list, texts: dict | None = None, start: int = 0
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
    if plan.unnest and plan.returning:
        # One short statement whatever the row count, and one row back (the statement's
        # clock, see insert_sql.plan()): prepared once, run straight through libpq.
        set_returned(connection, first, plan.returning, direct.run(connection, sql, params, prepare=True))
        clock = [(field.attname, getattr(first, field.attname)) for field, _converters in plan.returning]
        for instance in chunk:
            for name, value in clock:
                setattr(instance, name, value)
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if not plan.returning:
            return
        rows = cursor.fetchall()
    for instance, row in zip(chunk, rows, strict=True):
        set_returned(connection, instance, plan.returning, row)


def set_returned(connection, instance, returning: list, row) -> None:
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
