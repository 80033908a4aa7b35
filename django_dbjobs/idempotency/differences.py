"""What a second snapshot has that the first has not: rows added, removed or changed, new jobs and emails."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .report import RowChange
from .snapshots import Snapshot, Table


def row_changes(first: Snapshot, second: Snapshot) -> list[RowChange]:
    """The rows that differ from `first` in `second` (same tables), table by table.

    A row deleted and made again alike, with a new generated key (a job that replaces its
    rows), is the same row: rows are paired by content, foreign keys to paired rows
    followed, so only what the data says counts.
    """
    renamed = _pairs(first, second)
    changes = []
    for label, before in first.tables.items():
        after, pairs = second.tables[label], renamed[label]
        for pk, values in before.rows.items():
            new_pk = pairs.get(pk, pk)
            if new_pk not in after.rows:
                changes.append(_whole(before, pk, values, "removed"))
                continue
            moved = _followed(before, values, renamed)
            if moved != after.rows[new_pk]:
                changed = {
                    column: (old, new)
                    for column, old, followed, new in zip(
                        before.columns, values, moved, after.rows[new_pk], strict=True
                    )
                    if followed != new
                }
                changes.append(RowChange(before.model._meta.db_table, label, new_pk, "changed", changed))
        made = set(pairs.values())
        for pk in _in_order(after.rows.keys() - before.rows.keys() - made):
            changes.append(_whole(after, pk, after.rows[pk], "added"))
    return changes


def new_jobs(first: Snapshot, second: Snapshot) -> tuple[str, ...]:
    """The jobs in `second`'s queue that `first`'s has not, in the order they were enqueued."""
    return tuple(second.jobs[pk] for pk in _in_order(second.jobs.keys() - first.jobs.keys()))


def new_emails(first: Snapshot, second: Snapshot) -> tuple[str, ...]:
    """The emails sent after `first` was read (the outbox only grows)."""
    return second.emails[len(first.emails) :]


def _pairs(first: Snapshot, second: Snapshot) -> dict[str, dict[Any, Any]]:
    """Rows of `first` gone from `second`, each paired with a new row of the same content."""
    renamed: dict[str, dict[Any, Any]] = defaultdict(dict)
    paired_something = True
    while paired_something:  # a pairing of parents can make their children's content match
        paired_something = False
        for label, before in first.tables.items():
            after = second.tables[label]
            if not before.generated_keys:
                continue
            pairs = renamed[label]
            gone = before.rows.keys() - after.rows.keys() - pairs.keys()
            new = after.rows.keys() - before.rows.keys() - set(pairs.values())
            if not gone or not new:
                continue
            by_content: dict[tuple, list] = defaultdict(list)
            for pk in _in_order(new):
                by_content[after.rows[pk]].append(pk)
            for pk in _in_order(gone):
                alike = by_content.get(_followed(before, before.rows[pk], renamed))
                if alike:
                    pairs[pk] = alike.pop(0)
                    paired_something = True
    return renamed


def _followed(table: Table, values: tuple, renamed: dict[str, dict[Any, Any]]) -> tuple:
    """`values` with each foreign key to a paired row replaced by its new row's key."""
    return tuple(
        value if target is None else renamed[target].get(value, value)
        for value, target in zip(values, table.targets, strict=True)
    )


def _whole(table: Table, pk: Any, values: tuple, kind: str) -> RowChange:
    return RowChange(
        table.model._meta.db_table, table.label, pk, kind, dict(zip(table.columns, values, strict=True))
    )


def _in_order(keys) -> list:
    """Keys in creation order where they say it (generated integers), else in a stable one."""
    try:
        return sorted(keys)
    except TypeError:  # mixed or unorderable keys
        return sorted(keys, key=repr)
