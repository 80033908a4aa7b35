"""PostgreSQL: many new jobs in one ``COPY ... FROM STDIN`` (psycopg 3), the bulk path's fastest.

``COPY`` skips what costs an ``INSERT`` of many rows the most: parsing its arrays or
VALUES list. Its rows are written by psycopg's C code, each value once, and the server
reads them as a stream. It keeps what the INSERT path promises:

- **The caller's transaction.** ``COPY`` runs on the same connection, inside it: the jobs
  commit or roll back with the caller's data.
- **The wake-up.** ``COPY FROM`` fires the table's ``AFTER INSERT`` triggers, so the
  statement-level ``NOTIFY`` is sent on commit, as for an INSERT.
- **The ids** are made in Python (ids.py), so nothing needs reading back; the
  database-clock columns (``run_at``, ``enqueued_at``) get one read of the clock, shared by
  every row (enqueuing/clock_once.py), as on MySQL and SQLite.
- **Errors** are Django's (``DataError``, ``IntegrityError``...), and the transaction is
  marked for rollback on them, as for an INSERT.

Unique jobs never come this way: bulk_enqueue() refuses ``unique_key`` (a conflict would
end the whole COPY). ``COPY`` goes through the driver's copy API, not ``cursor.execute()``:
Django's ``execute_wrappers`` and ``connection.queries`` do not see it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from .insert_rows import db_param

#: Fewest rows sent by COPY: below it the INSERT's single round trip wins (COPY takes two,
#: after the read of the clock).
FEWEST_ROWS = 64


def usable(connection, rows: int) -> bool:
    """Whether `rows` jobs go in by COPY on `connection`: PostgreSQL through psycopg 3 (the
    driver this connection uses, not merely one installed)."""
    if connection.vendor != "postgresql" or rows < FEWEST_ROWS:
        return False
    return getattr(getattr(connection, "Database", None), "__name__", "") == "psycopg"


def copy(connection, shape: tuple, chunks: Iterable[list], texts: dict | None, model, specs: list) -> None:
    """COPY the unsaved instances of `model` in `chunks` (one list or more, in order), all of
    `shape` (see insert_sql.plan(); no 'd': the clock is read before, see the module
    docstring); `specs` describe its fields (enqueuing/rows.py field_specs()); `texts`
    holds JSON fields' values already as text, in the order of the instances. A chunk is
    taken from `chunks` once the rows before it are handed to psycopg, which sends them
    32 KiB at a time: it may be built meanwhile (enqueuing/inserts.py build_and_copy())."""
    quote_name = connection.ops.quote_name
    columns = ", ".join(quote_name(spec.field.column) for spec in specs)
    table = quote_name(model._meta.db_table)
    template: list | None = None
    varying: list[tuple[int, object]] = []
    start = 0
    with connection.wrap_database_errors, connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as stream:
            for group in chunks:
                if template is None:
                    template = _template(connection, specs, shape, group[0], varying)
                columns_of_rows = []
                for index, spec in varying:
                    if texts and spec.attname in texts:
                        values = texts[spec.attname][start : start + len(group)]
                    elif spec.is_text:
                        values = [getattr(job, spec.attname) for job in group]
                        values = [
                            v if v is None or type(v) is str else db_param(connection, spec, v)
                            for v in values
                        ]
                    else:
                        values = [db_param(connection, spec, getattr(job, spec.attname)) for job in group]
                    columns_of_rows.append((index, values))
                row = list(template)
                for number in range(len(group)):
                    for index, values in columns_of_rows:
                        row[index] = values[number]
                    stream.write_row(row)
                start += len(group)


def _template(connection, specs: list, shape: tuple, first, varying: list) -> list:
    """A row with every constant and shared value in place, None where each row's own goes
    (the fields appended to `varying`)."""
    template: list = []
    for index, (spec, kind) in enumerate(zip(specs, shape, strict=True)):
        if kind == "c":
            template.append(_constant(spec))
        elif kind == "s":
            template.append(db_param(connection, spec, getattr(first, spec.attname)))
        else:
            template.append(None)
            varying.append((index, spec))
    return template


def _constant(spec):
    """A constant default as COPY's text format takes it (JSON as its text)."""
    if spec.is_json and spec.default is not None:
        return json.dumps(spec.default)
    return spec.default
