"""enqueue(), aenqueue(), prepare() and bulk_enqueue(): put jobs in the table.

A job's own keyword arguments go in ``kwargs={...}``; every other keyword is an
enqueue option. So a job with a parameter called ``queue`` or ``priority`` can never
have it mistaken for an option.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Iterable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, connections, router, transaction
from django.db.models.expressions import DatabaseDefault
from django.db.models.signals import post_save, pre_save
from django.db.models.sql import InsertQuery

from . import db, registry, validation, wakeup
from .conf import settings
from .exceptions import InvalidJob
from .models import Job
from .registry import JobFunction
from .signals import job_enqueued

logger = logging.getLogger("django_dbjobs")

JobTarget = JobFunction | Callable | str


def prepare(
    job: JobTarget,
    *args: Any,
    kwargs: dict[str, Any] | None = None,
    queue: str | None = None,
    priority: int | None = None,
    run_at: datetime.datetime | None = None,
    delay: datetime.timedelta | float | None = None,
    max_attempts: int | None = None,
    unique_key: str | None = None,
    using: str | None = None,
) -> Job:
    """Validate a job and return it as an unsaved Job, ready for bulk_enqueue().

    Raises an InvalidJob subclass naming the bad argument; nothing is written.
    """
    registered = registry.resolve(job)
    defaults = registered.options
    using = using or router.db_for_write(Job)
    clean_args, clean_kwargs = validation.payload(args, kwargs or {}, db.rejects_nul(using))
    fields = {
        "name": registered.name,
        "args": clean_args,
        "kwargs": clean_kwargs,
        "queue": validation.queue(_first(queue, defaults.queue, settings.DEFAULT_QUEUE)),
        "priority": validation.priority(_first(priority, defaults.priority, settings.DEFAULT_PRIORITY)),
        "max_attempts": validation.max_attempts(
            _first(max_attempts, defaults.max_attempts, settings.DEFAULT_MAX_ATTEMPTS)
        ),
    }
    if unique_key is not None:
        fields["unique_key"] = fields["active_key"] = validation.unique_key(unique_key, db.rejects_nul(using))
    when = validation.run_at(run_at, delay)
    if when is not None:
        fields["run_at"] = when
    instance = Job(**fields)
    instance._state.db = using
    return instance


def enqueue(job: JobTarget, *args: Any, using: str | None = None, **options: Any) -> Job:
    """Store a job to run `job(*args, **kwargs)` in a worker, and return it.

    Inside ``transaction.atomic`` the row joins the caller's transaction; workers in
    this process are woken when it commits, never on rollback.

    Options: ``kwargs`` (the job's keyword arguments), ``queue``, ``priority``
    (-100..100, higher runs first), ``run_at`` (aware datetime) or ``delay``
    (seconds or timedelta), ``max_attempts``, ``unique_key``, ``using`` (database alias).

    With ``unique_key``, if a READY or RUNNING job of the same name has that key,
    nothing is written and that job is returned instead.
    """
    instance = prepare(job, *args, using=using, **options)
    using = instance._state.db
    if instance.unique_key is not None:
        instance, created = _insert_unique(instance, using)
        if not created:
            return instance
    else:
        _insert(instance, using)
    _enqueued([instance], using)
    return instance


_insert_sql: dict[tuple, tuple[str, list]] = {}


def _insert(instance: Job, using: str) -> None:
    """INSERT one prepared job with SQL compiled once per database and field set.

    Model.save() compiles the INSERT anew each time, which costs more than the
    database's own work for it. The result is the same row, with the database
    defaults (run_at, enqueued_at) read back. Falls back to save() where the
    database cannot return them, or when someone listens to Job's save signals.
    """
    connection = connections[using]
    if not connection.features.can_return_columns_from_insert or (
        pre_save.has_listeners(Job) or post_save.has_listeners(Job)
    ):
        instance.save(using=using, force_insert=True)
        return
    fields, defaulted = [], []
    for field in Job._meta.concrete_fields:
        value = getattr(instance, field.attname)
        (defaulted if isinstance(value, DatabaseDefault) else fields).append(field)
    key = (using, tuple(f.attname for f in fields))
    sql = _insert_sql.get(key)
    if sql is None:
        query = InsertQuery(Job)
        query.insert_values(fields, [instance])
        compiler = query.get_compiler(using=using)
        compiler.returning_fields = defaulted
        ((sql, _params),) = compiler.as_sql()
        _insert_sql[key] = sql
    params = [f.get_db_prep_save(getattr(instance, f.attname), connection) for f in fields]
    with transaction.mark_for_rollback_on_error(using), connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone() if defaulted else ()
    for field, value in zip(defaulted, row, strict=True):
        for converter in connection.ops.get_db_converters(field.cached_col) + field.get_db_converters(
            connection
        ):
            value = converter(value, field.cached_col, connection)
        setattr(instance, field.attname, value)
    instance._state.adding = False
    instance._state.db = using


def _insert_unique(instance: Job, using: str) -> tuple[Job, bool]:
    """Insert a job unless its key is taken; return the job holding the key and whether it is new.

    The database's unique constraint decides, not a check-then-insert: a conflicting
    insert is skipped (ON CONFLICT DO NOTHING / INSERT IGNORE / INSERT OR IGNORE),
    waiting first for a concurrent holder to commit or roll back.
    """
    holders = Job.objects.using(using).filter(name=instance.name, active_key=instance.active_key)
    for _ in range(5):
        Job.objects.using(using).bulk_create([instance], ignore_conflicts=True)
        holder = holders.first()
        if holder is not None:
            return holder, holder.pk == instance.pk
        # The holder finished between the insert and the read: the key is free again.
    raise DatabaseError(f"Could not store job {instance.name} with unique_key={instance.unique_key!r}.")


async def aenqueue(job: JobTarget, *args: Any, **options: Any) -> Job:
    """The async twin of enqueue()."""
    return await sync_to_async(enqueue)(job, *args, **options)


def bulk_enqueue(jobs: Iterable[Job], batch_size: int = 1000) -> list[Job]:
    """Store many prepared jobs with bulk_create, in as few INSERTs as batch_size allows.

    Pass jobs made by prepare(); all go to the database of the first one. Every job
    is validated before anything is written.
    """
    jobs = list(jobs)
    if not jobs:
        return []
    for instance in jobs:
        if not isinstance(instance, Job) or instance._state.adding is False:
            raise TypeError("bulk_enqueue() takes unsaved jobs made by prepare().")
        if instance.unique_key is not None:
            raise InvalidJob("bulk_enqueue() does not take unique_key; use enqueue() for unique jobs.")
    using = jobs[0]._state.db or router.db_for_write(Job)
    with transaction.atomic(using=using):
        created = Job.objects.using(using).bulk_create(jobs, batch_size=batch_size)
        _enqueued(created, using)
    return created


def _enqueued(jobs: list[Job], using: str) -> None:
    for instance in jobs:
        job_enqueued.send(sender=Job, job=instance)
        logger.debug("Job enqueued id=%s name=%s queue=%s", instance.pk, instance.name, instance.queue)
    transaction.on_commit(wakeup.notify, using=using)


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)
