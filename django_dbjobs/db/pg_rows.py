"""PostgreSQL: the rows of a statement libpq.py ran, as Python values."""

from __future__ import annotations

from psycopg import errors, pq


def rows_of(results: list, which: int, transformer, statement: bytes | None):
    """The rows of `results[which]`, once no result is an error (raised as psycopg's); with
    `statement` (run with `many`), (rows, column names)."""
    for result in results:
        if result.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            raise errors.error_from_result(result, encoding="utf-8")
    result = results[which]
    rows = []
    if result.ntuples:
        transformer.set_pgresult(result)
        try:
            rows = transformer.load_rows(0, result.ntuples, tuple)
        finally:
            transformer.set_pgresult(None)
    if statement is None:
        return rows
    return rows, _column_names(statement, result)


#: The column names of each statement run with `many`, as a tuple (at most MAX_COLUMN_LISTS).
_columns: dict[bytes, tuple[str, ...]] = {}
MAX_COLUMN_LISTS = 256


def _column_names(statement: bytes, result) -> tuple[str, ...]:
    """The names of `result`'s columns: worked out once per statement (the claim's are 32,
    decoded one call each, cold, on every wake-up); a statement's text names its columns,
    and their count is checked on every result all the same."""
    names = _columns.get(statement)
    if names is None or len(names) != result.nfields:
        if len(_columns) >= MAX_COLUMN_LISTS:
            _columns.clear()
        names = _columns[statement] = tuple(result.fname(n).decode() for n in range(result.nfields))
    return names
