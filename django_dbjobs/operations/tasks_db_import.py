"""Move django-tasks-db's waiting tasks into the job table (``manage.py dbjobs_import_tasks_db``).

The source table is read and emptied with plain SQL, never through django-tasks-db's
model, so the import works after the package is uninstalled and only its table is left.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

from django.db import DatabaseError, connections, router, transaction
from django.utils import timezone

from .. import db
from ..enqueuing.api import job_fields
from ..enqueuing.bulk import bulk_enqueue
from ..enqueuing.rows import build
from ..enqueuing.spec import JobSpec
from ..enqueuing.validation import short
from ..exceptions import DbJobsError, InvalidJob, InvalidJobArguments
from ..models import Job

#: django-tasks-db's table: named after its app label (django_tasks_database), not its package.
SOURCE_TABLE = "django_tasks_database_dbtaskresult"
DEFAULT_BATCH_SIZE = 500
# django-tasks-db stores "no run_after" as this date rather than NULL, so its claim can sort on it.
NO_RUN_AFTER = datetime.datetime(9999, 1, 1, tzinfo=datetime.timezone.utc)
COLUMNS = ("id", "task_path", "queue_name", "args_kwargs", "priority", "run_after", "enqueued_at")
EXAMPLE_IDS = 3  # ids shown per reason a row cannot move


class InvalidSourceTable(DbJobsError):
    """The table to import from does not exist, or lacks django-tasks-db's columns."""


@dataclass
class ImportReport:
    """What an import moved (in a dry run: would move), and what it left in the source table."""

    table: str
    committed: bool
    batches: int = 0
    moved: Counter = field(default_factory=Counter)  # (task path, queue) -> jobs
    # Rows whose id is already a job (moved by an earlier run): deleted from the source only.
    already_jobs: int = 0
    # (task path, reason) -> (rows, example ids): rows left in the source table.
    left: dict = field(default_factory=dict)

    def leave(self, task_path: str, reason: str, job_id: str) -> None:
        rows, ids = self.left.get((task_path, reason), (0, []))
        self.left[(task_path, reason)] = (rows + 1, ids if len(ids) >= EXAMPLE_IDS else [*ids, job_id])

    def lines(self) -> list[str]:
        """The report for people: the jobs by task path and queue, the rows left, a summary."""
        verb = "Moved" if self.committed else "Would move"
        lines = [f"{verb}, by task path and queue:"] if self.moved else []
        lines += [f"  {path}  queue={queue}  {count}" for (path, queue), count in sorted(self.moved.items())]
        if self.already_jobs:
            lines.append(
                f"Already jobs (moved by an earlier run): {_count(self.already_jobs, 'row')}, "
                f"{'deleted' if self.committed else 'would be deleted'} from {self.table} only."
            )
        if self.left:
            lines.append(f"Rows that cannot be moved (left in {self.table}):")
        for (path, reason), (rows, ids) in sorted(self.left.items()):
            lines.append(f"  {path}: {_count(rows, 'row')} (e.g. {', '.join(ids)}): {reason}")
        summary = f"{verb} {_count(sum(self.moved.values()), 'job')} ({_count(self.batches, 'batch')})"
        if self.left:
            summary += f"; {_count(sum(n for n, _ in self.left.values()), 'row')} cannot be moved (see above)"
        lines.append(summary + ("." if self.committed else ". Dry run: run again with --commit to move."))
        return lines


def import_tasks_db(
    *,
    table: str = SOURCE_TABLE,
    queues: Sequence[str] = (),
    batch_size: int = DEFAULT_BATCH_SIZE,
    using: str | None = None,
    commit: bool = False,
) -> ImportReport:
    """Move the READY rows of django-tasks-db's `table` into Job, one short transaction per batch.

    Without `commit` nothing is written or locked: the report says what would move.
    Rows are taken in id order after the last batch's, so a row that cannot move is
    read once and left in place. Rows another transaction holds locked (a db_worker
    claiming them) are skipped, where the database can skip locked rows.
    """
    using = using or router.db_for_write(Job)
    connection = connections[using]
    _check_table(connection, table)
    # The check for rows already moved sends one parameter per row.
    limit = min(batch_size, connection.features.max_query_params or batch_size)
    report = ImportReport(table, commit)
    after = None
    while True:
        with transaction.atomic(using=using) if commit else nullcontext():
            rows = _select(connection, table, queues, after, limit, lock=commit)
            if rows:
                _move(rows, connection, table, report, commit)
        if not rows:
            return report
        report.batches += 1
        after = rows[-1][0]
        if len(rows) < limit:
            return report


def _check_table(connection, table: str) -> None:
    """Raise InvalidSourceTable unless `table` exists and has django-tasks-db's columns."""
    with connection.cursor() as cursor:
        if table not in connection.introspection.table_names(cursor):
            raise InvalidSourceTable(
                f"The database {connection.alias!r} has no table {table!r} to import from. django-tasks-db's "
                f"table is {SOURCE_TABLE!r}; pass --table if yours has another name."
            )
        found = {column.name for column in connection.introspection.get_table_description(cursor, table)}
    missing = [column for column in ("status", *COLUMNS) if column not in found]
    if missing:
        raise InvalidSourceTable(
            f"The table {table!r} has no column {', '.join(missing)}, so it is not a django-tasks-db "
            "table; migrate django-tasks-db to 0.13 first."
        )


def _select(connection, table: str, queues: Sequence[str], after, limit: int, lock: bool) -> list[tuple]:
    """The next `limit` READY rows after the id `after`, in id order; locked with `lock`."""
    # `table` is quoted as an identifier, and _check_table() found it in the database.
    quote = connection.ops.quote_name
    where, params = [f"{quote('status')} = %s"], ["READY"]
    if queues:
        where.append(f"{quote('queue_name')} IN ({', '.join(['%s'] * len(queues))})")
        params += list(queues)
    if after is not None:
        where.append(f"{quote('id')} > %s")
        params.append(after)
    sql = (
        f"SELECT {', '.join(quote(column) for column in COLUMNS)} FROM {quote(table)} "
        f"WHERE {' AND '.join(where)} ORDER BY {quote('id')} LIMIT %s"
    )
    # A running db_worker's claim must neither block this import nor be blocked by it.
    # SQLite has no row locks: the transaction's write lock serialises the two instead.
    if lock and db.can_skip_locked(connection.alias):
        sql += " " + connection.ops.for_update_sql(skip_locked=True)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, limit])
        return cursor.fetchall()


def _move(rows: list[tuple], connection, table: str, report: ImportReport, commit: bool) -> None:
    """Turn one batch of rows into jobs; with `commit`, insert them and delete what moved."""
    by_id = {}  # our job id -> the row, whose own id is as the source table stores it
    for row in rows:
        try:
            by_id[job_id(row[0])] = row
        except ValueError:
            report.leave(row[1], f"{row[0]!r} is not a UUID.", str(row[0]))
    known = set(Job.objects.using(connection.alias).filter(pk__in=list(by_id)).values_list("pk", flat=True))
    report.already_jobs += len(known)
    jobs, moved = [], []  # moved: the source ids to delete, jobs already there included
    for pk, row in by_id.items():
        if pk not in known:
            try:
                job = _job(pk, row, connection)
            except InvalidJob as exc:
                report.leave(row[1], str(exc), pk)
                continue
            jobs.append(job)
            report.moved[(job.name, job.queue)] += 1
        moved.append(row[0])
    if commit:
        bulk_enqueue(jobs, batch_size=len(rows))
        _delete(connection, table, moved)


def job_id(stored: uuid.UUID | str) -> str:
    """A source row's id as our job id: the 36-character UUID, whether stored as uuid or 32 hex."""
    return str(stored if isinstance(stored, uuid.UUID) else uuid.UUID(str(stored)))


def _job(pk: str, row: tuple, connection) -> Job:
    """The unsaved Job for one source row; InvalidJob says why the row cannot be one."""
    _stored_id, task_path, queue, args_kwargs, priority, run_after, enqueued_at = row
    payload = _json(args_kwargs)
    args, kwargs = (
        (payload.get("args", []), payload.get("kwargs", {})) if isinstance(payload, dict) else (None, None)
    )
    if not (isinstance(args, list) and isinstance(kwargs, dict)):
        raise InvalidJobArguments(
            f"args_kwargs is not {{'args': [...], 'kwargs': {{...}}}}: {short(payload)}."
        )
    enqueued = _datetime(enqueued_at, connection)
    due = _datetime(run_after, connection)
    if due is None or due >= NO_RUN_AFTER:
        # Due since it was enqueued, as enqueue() would have made it: keeps first-in, first-out.
        due = enqueued
    # Validated as enqueue() would; no enqueuer's context: the importing process is not the enqueuer.
    spec = JobSpec(queue=queue, priority=priority, run_at=due, using=connection.alias, capture_context=False)
    fields, using = job_fields(task_path, args, kwargs, spec)
    job = build(fields, using)
    job.id = pk
    if enqueued is not None:
        job.enqueued_at = enqueued
    return job


def _json(value):
    """JSON as the driver returned it: text (SQLite, MySQL; PostgreSQL through Django) or parsed."""
    if not isinstance(value, str | bytes | bytearray):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise InvalidJobArguments(f"args_kwargs is not JSON: {short(value)}.") from None


def _datetime(raw, connection) -> datetime.datetime | None:
    """A DateTimeField value as the driver returned it, as an aware datetime (or None)."""
    if raw is None:
        return None
    value = db.as_datetime(raw, Job._meta.get_field("enqueued_at"), connection)
    return timezone.make_aware(value) if timezone.is_naive(value) else value


def _delete(connection, table: str, stored_ids: list) -> None:
    """Delete the moved rows by their ids as stored; fail the batch if one is no longer READY."""
    if not stored_ids:
        return
    quote = connection.ops.quote_name
    # One statement per row, by key: MariaDB may run DELETE ... IN (...) as a scan, which
    # waits for the rows a running db_worker holds locked.
    with connection.cursor() as cursor:
        cursor.executemany(
            f"DELETE FROM {quote(table)} WHERE {quote('id')} = %s AND {quote('status')} = %s",
            [(stored_id, "READY") for stored_id in stored_ids],
        )
        deleted = cursor.rowcount
    if deleted != len(stored_ids):
        # Only where rows are not locked (SQLite outside BEGIN IMMEDIATE) can a worker claim one meanwhile.
        raise DatabaseError(
            f"{len(stored_ids) - deleted} of the rows being moved from {table!r} changed meanwhile; this "
            "batch was rolled back. Stop django-tasks-db's db_worker and run the import again."
        )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}{'es' if noun.endswith('ch') else 's'}"
