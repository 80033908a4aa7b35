"""PostgreSQL: many new jobs in one ``COPY ... FROM STDIN`` (psycopg 3), the bulk path's fastest.

``COPY`` skips what costs an ``INSERT`` of many rows the most: parsing its arrays or
VALUES list. Its rows are written by psycopg's C code, each value once, and the server
reads them as a stream. It keeps what the INSERT path promises:

- **The caller's transaction.** ``COPY`` runs on the same connection, inside it: the jobs
  commit or roll back with the caller's data.
- **The wake-up.** ``COPY FROM`` fires the table's ``AFTER INSERT`` triggers, so the
  statement-level ``NOTIFY`` is sent on commit, as for an INSERT.
- **The ids** are made in Python before (ids.py), so nothing needs reading back; the
  database-clock columns (``run_at``, ``enqueued_at``) get one read of the clock, shared by
  every row (inserts._clock_once()), as on MySQL and SQLite.
- **Errors** are Django's (``DataError``, ``IntegrityError``...), and the transaction is
  marked for rollback on them, as for an INSERT.

Unique jobs never come this way: bulk_enqueue() refuses ``unique_key`` (a conflict would
end the whole COPY). ``COPY`` goes through the driver's copy API, not ``cursor.execute()``:
Django's ``execute_wrappers`` and ``connection.queries`` do not see it.
"""

from __future__ import annotations

import json

from ..models import Job
from .rows import FieldSpec, field_specs

#: Fewest rows sent by COPY: below it the INSERT's single round trip wins (COPY takes two,
#: after the read of the clock).
FEWEST_ROWS = 64


def usable(connection, rows: int) -> bool:
    """Whether `rows` jobs go in by COPY on `connection`: PostgreSQL through psycopg 3 (the
    driver this connection uses, not merely one installed)."""
    if connection.vendor != "postgresql" or rows < FEWEST_ROWS:
        return False
    return getattr(getattr(connection, "Database", None), "__name__", "") == "psycopg"


def copy(connection, shape: tuple, group: list[Job], texts: dict | None, db_param) -> None:
    """COPY the jobs of `group`, all of `shape` (no 'd': the clock is read before, see the module
    docstring); `texts` holds JSON fields' values already as text, in the order of `group`;
    `db_param(connection, spec, value)` is the value the INSERT would send."""
    specs = field_specs()
    quote_name = connection.ops.quote_name
    columns = ", ".join(quote_name(spec.field.column) for spec in specs)
    template: list = []
    varying: list[tuple[int, FieldSpec]] = []
    first = group[0]
    for index, (spec, kind) in enumerate(zip(specs, shape, strict=True)):
        if kind == "c":
            template.append(_constant(spec))
        elif kind == "s":
            template.append(db_param(connection, spec, getattr(first, spec.attname)))
        else:
            template.append(None)
            varying.append((index, spec))
    columns_of_rows = []
    for index, spec in varying:
        if texts and spec.attname in texts:
            values = texts[spec.attname]
        elif spec.is_text:
            values = [getattr(job, spec.attname) for job in group]
            values = [v if v is None or type(v) is str else db_param(connection, spec, v) for v in values]
        else:
            values = [db_param(connection, spec, getattr(job, spec.attname)) for job in group]
        columns_of_rows.append((index, values))
    table = quote_name(Job._meta.db_table)
    with connection.wrap_database_errors, connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as stream:
            row = list(template)
            for number in range(len(group)):
                for index, values in columns_of_rows:
                    row[index] = values[number]
                stream.write_row(row)


def _constant(spec: FieldSpec):
    """A constant default as COPY's text format takes it (JSON as its text)."""
    if spec.is_json and spec.default is not None:
        return json.dumps(spec.default)
    return spec.default
