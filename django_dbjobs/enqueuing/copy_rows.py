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
  every row (clock_once.py), as on MySQL and SQLite.
- **Errors** are Django's (``DataError``, ``IntegrityError``...), and the transaction is
  marked for rollback on them, as for an INSERT.

Unique jobs never come this way: bulk_enqueue() refuses ``unique_key`` (a conflict would
end the whole COPY). ``COPY`` goes through the driver's copy API, not ``cursor.execute()``:
Django's ``execute_wrappers`` and ``connection.queries`` do not see it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from ..models import Job
from .rows import FieldSpec, build_many, field_specs

#: Fewest rows sent by COPY: below it the INSERT's single round trip wins (COPY takes two,
#: after the read of the clock).
FEWEST_ROWS = 64
#: Jobs build_and_copy() builds before handing their rows to psycopg: about as many as it
#: sends at once (32 KiB), so the server has the first rows early.
BUILT_AT_ONCE = 200


def usable(connection, rows: int) -> bool:
    """Whether `rows` jobs go in by COPY on `connection`: PostgreSQL through psycopg 3 (the
    driver this connection uses, not merely one installed)."""
    if connection.vendor != "postgresql" or rows < FEWEST_ROWS:
        return False
    return getattr(getattr(connection, "Database", None), "__name__", "") == "psycopg"


def copy(connection, shape: tuple, chunks: Iterable[list[Job]], texts: dict | None, db_param) -> None:
    """COPY the jobs of `chunks` (one list or more, in order), all of `shape` (no 'd': the clock
    is read before, see the module docstring); `texts` holds JSON fields' values already as
    text, in the order of the jobs; `db_param(connection, spec, value)` is the value the
    INSERT would send. A chunk is taken from `chunks` once the rows before it are handed
    to psycopg, which sends them 32 KiB at a time: it may be built meanwhile
    (build_and_copy())."""
    specs = field_specs()
    quote_name = connection.ops.quote_name
    columns = ", ".join(quote_name(spec.field.column) for spec in specs)
    table = quote_name(Job._meta.db_table)
    template: list | None = None
    varying: list[tuple[int, FieldSpec]] = []
    start = 0
    with connection.wrap_database_errors, connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as stream:
            for group in chunks:
                if template is None:
                    template = _template(connection, shape, group[0], varying, db_param)
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


def build_and_copy(connection, common: dict, each: list[dict], shape: tuple, texts: dict | None, db_param):
    """rows.build_many(common, each) and copy() of the jobs, built a chunk at a time while
    the rows before go out: the server stores rows while the next chunk is built (a fifth
    of enqueue_many()'s time was building the jobs, the server waiting). Never with init
    signal receivers (bulk.py): no user code runs while the COPY holds the connection.
    Return the jobs."""
    jobs: list[Job] = []
    using = connection.alias

    def chunks() -> Iterator[list[Job]]:
        for start in range(0, len(each), BUILT_AT_ONCE):
            chunk = build_many(common, each[start : start + BUILT_AT_ONCE], using)
            jobs.extend(chunk)
            yield chunk

    copy(connection, shape, chunks(), texts, db_param)
    return jobs


def _template(connection, shape: tuple, first: Job, varying: list, db_param) -> list:
    """A row with every constant and shared value in place, None where each row's own goes
    (the fields appended to `varying`)."""
    template: list = []
    for index, (spec, kind) in enumerate(zip(field_specs(), shape, strict=True)):
        if kind == "c":
            template.append(_constant(spec))
        elif kind == "s":
            template.append(db_param(connection, spec, getattr(first, spec.attname)))
        else:
            template.append(None)
            varying.append((index, spec))
    return template


def _constant(spec: FieldSpec):
    """A constant default as COPY's text format takes it (JSON as its text)."""
    if spec.is_json and spec.default is not None:
        return json.dumps(spec.default)
    return spec.default
