"""The SQL of the fast INSERTs (insert_rows.py runs it): one statement per database, row
count and shape of row, worked out once.

A column still at its default is a literal in the SQL; only the job's own values are
parameters. Many rows: PostgreSQL gets one array per column (``INSERT ... SELECT ... FROM
ROWS FROM``) and reads the database clock back once in the same statement; SQLite gets
every row in one JSON parameter (``json_each``); MariaDB a ``VALUES`` list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import connections

#: How a JSON text parameter is written into an INSERT.
JSON_PLACEHOLDER = {"postgresql": "%s::jsonb", "mysql": "%s", "sqlite": "%s"}


@dataclass(frozen=True)
class Plan:
    head: str  # "INSERT INTO ... (...) VALUES " (or the whole statement, with unnest)
    # One row of VALUES (with json_rows, the SELECT list): SQL text, and on MySQL the fields
    # shared by all rows, written in per statement by the driver's escaping (see plan()):
    # ["(%s, ", <queue spec>, ", 'READY', 0, ...)"].
    row: list
    tail: str  # " RETURNING ..." or ""
    params: list  # the fields sent as a parameter for every row, in order
    returning: list  # (field, converters) of the columns read back
    # PostgreSQL: ``INSERT ... SELECT ... FROM ROWS FROM (...)`` with one array parameter
    # per column: a short statement whatever the row count, parsed far faster than long
    # VALUES lists. The values every row shares are scalar parameters before them.
    unnest: bool = False
    shared: list = ()  # with unnest or json_rows: the fields sent once, as scalar parameters
    # SQLite: ``INSERT ... SELECT ... FROM json_each(%s)``, every row's values in one JSON
    # parameter, `row` the SELECT list: the statement stays short, so parsing it costs
    # next to nothing, where a long VALUES list repeats each constant in every row.
    json_rows: bool = False


_plans: dict[tuple, Plan] = {}


def plan(using: str, model, specs: list, shape: tuple, many: bool, json_rows: bool = True) -> Plan:
    """The INSERT into `model`'s table of rows of this shape; `json_rows` False asks SQLite
    for a VALUES list (json_safe()).

    `specs` describe the model's concrete fields, in order (enqueuing/rows.py
    field_specs(): each with its field, attname, default, and whether it is JSON or text);
    `shape` says, per field, how its value reaches the row: 'd' filled in by the database
    (read back), 'c' its constant default (a literal in the SQL), 's' one value shared by
    every row (a parameter per statement), 'p' a parameter per row.
    """
    key = (using, model, shape, many, json_rows)
    found = _plans.get(key)
    if found is not None:
        return found
    connection = connections[using]
    unnest = many and connection.vendor == "postgresql"
    json_rows = json_rows and many and connection.vendor == "sqlite"
    quote_name = connection.ops.quote_name
    quote = connection.schema_editor().quote_value
    json_placeholder = JSON_PLACEHOLDER[connection.vendor]
    columns, values, params, returning, arrays, shared = [], [], [], [], [], []
    for spec, kind in zip(specs, shape, strict=True):
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
        elif kind == "s" and (unnest or json_rows):  # one scalar parameter in the SELECT list
            values.append(json_placeholder if spec.is_json else "%s")
            shared.append(spec)
        elif kind == "s" and connection.vendor == "mysql":
            # MySQLdb sends no parameters: it writes each into the statement, escaped by
            # the connection's literal(). A value every row shares is written in once per
            # statement by that same function (insert_rows.py), not escaped again for every row.
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
    table = quote_name(model._meta.db_table)
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
        plan = Plan(head, [], tail, params, returning, unnest=True, shared=shared)
    elif json_rows:
        tail = " FROM json_each(%s)" + tail
        plan = Plan(
            head + "SELECT ", [", ".join(values)], tail, params, returning, json_rows=True, shared=shared
        )
    else:
        row: list = ["("]
        for n, value in enumerate(values):
            row += [", ", value] if n else [value]
        row.append(")")
        if all(isinstance(part, str) for part in row):
            row = ["".join(row)]
        plan = Plan(head + "VALUES ", row, tail, params, returning)
    _plans[key] = plan
    return plan


def reads_clock_back(connection, rows: int) -> bool:
    """Whether the INSERT of `rows` rows reads the database-filled columns (the clock) back
    itself: one row (``RETURNING``), or many on PostgreSQL (once, in the same statement:
    see plan()). Elsewhere the caller reads the clock first and sends it as a value every
    row shares (enqueuing/clock_once.py): ``RETURNING`` from every row costs a multi-row
    INSERT about a third of its time."""
    return rows == 1 or connection.vendor == "postgresql"


def json_safe(plan: Plan, group: list, skip: frozenset = frozenset()) -> bool:
    """Whether SQLite's JSON functions give back every per-row value of `group` unchanged
    (the fields named in `skip` are known to be safe: values this package made).

    A JSON field's value travels as its JSON text, a plain string: always. A text value
    with a NUL (SQLite before 3.45 cuts the string there) or a lone surrogate, or an
    integer beyond 64 bits, does not: those rows go in as a VALUES list instead.
    """
    for spec in plan.params:
        if spec.is_json or spec.attname in skip:
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


def _literal(spec, quote) -> str:
    """SQL text for a constant default: None, a boolean, an integer, a string, or JSON."""
    value = spec.default
    if value is None:
        return "NULL"
    if isinstance(value, bool):  # PostgreSQL has no cast from an integer to boolean here
        return "TRUE" if value else "FALSE"
    if spec.is_json:
        return str(quote(json.dumps(value)))
    if isinstance(value, str):
        return str(quote(value))
    return str(int(value))
