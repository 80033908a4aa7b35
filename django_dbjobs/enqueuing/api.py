"""enqueue(), aenqueue() and prepare(): put jobs in the table (bulk.py: many at once).

A job's own keyword arguments go in ``kwargs={...}``; every other keyword is an
enqueue option, a field of the JobSpec (spec.py) each call builds. So a job with a
parameter called ``queue`` or ``priority`` can never have it mistaken for an option.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, OperationalError, connections, router, transaction

from .. import db, registry
from ..models import Job
from ..observability import log_fields, producing
from ..registry import discovery
from ..registry.registered import RegisteredJob
from ..signals import has_receivers, job_enqueued
from . import (
    insert_one,
    inserts,
    rows,
    unserved_queues,
    validation,
    wakeup,
    workflow_cycles,
    workflow_options,
)
from .spec import ENQUEUE_OPTIONS, PREPARE_OPTIONS, EnqueueOptions, JobSpec, PrepareOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11

logger = logging.getLogger("django_dbjobs")

JobTarget = RegisteredJob | Callable | str


def prepare(
    job: JobTarget, *args: Any, kwargs: dict[str, Any] | None = None, **options: Unpack[PrepareOptions]
) -> Job:
    """Validate a job and return it as an unsaved Job, ready for bulk_enqueue().

    Takes enqueue()'s options but ``batch``, ``after`` and ``after_failure`` (bulk_enqueue()
    takes those). Raises an InvalidJob subclass naming the bad argument; nothing is written.
    """
    return prepared(job, args, kwargs, JobSpec.of("prepare", args, options, PREPARE_OPTIONS))


def prepared(job: JobTarget, args: tuple | list, kwargs: dict[str, Any] | None, spec: JobSpec) -> Job:
    """The unsaved Job of `job` with these arguments as `spec` asks, noted for bulk_enqueue()."""
    fields, using = job_fields(job, args, kwargs, spec)
    return rows.remember_build(rows.build(fields, using), fields)


def job_fields(
    job: JobTarget, args: tuple | list, kwargs: dict[str, Any] | None, spec: JobSpec
) -> tuple[dict[str, Any], str]:
    """The validated field values of a new job of `job` with these arguments as `spec` asks,
    and the database it goes to (InvalidJob if invalid)."""
    registered = registry.resolve(job)
    discovery.warn_if_unimported(registered)
    using = spec.using or router.db_for_write(Job)
    reject_nul = db.rejects_nul(using)
    clean_args, clean_kwargs = validation.payload(args, kwargs or {}, reject_nul)
    registered.check_arguments(clean_args, clean_kwargs)
    return _fields(registered, clean_args, clean_kwargs, spec, using, reject_nul), using


def common_fields(registered: RegisteredJob, spec: JobSpec) -> tuple[dict[str, Any], str]:
    """job_fields() without arguments: what every job of one enqueue_many() call shares."""
    discovery.warn_if_unimported(registered)
    using = spec.using or router.db_for_write(Job)
    return _fields(registered, [], {}, spec, using, db.rejects_nul(using)), using


def _fields(
    registered: RegisteredJob, args: list, kwargs: dict, spec: JobSpec, using: str, reject_nul: bool
) -> dict[str, Any]:
    fields: dict[str, Any] = {"name": registered.name, "args": args, "kwargs": kwargs}
    fields.update(spec.columns(registered, args, kwargs, reject_nul))
    unserved_queues.warn_if_unserved(fields["queue"], using)
    return fields


def enqueue(
    job: JobTarget, *args: Any, kwargs: dict[str, Any] | None = None, **options: Unpack[EnqueueOptions]
) -> Job:
    """Store a job to run `job(*args, **kwargs)` in a worker, and return it.

    Inside ``transaction.atomic`` the row joins the caller's transaction; workers in
    this process are woken when it commits, never on rollback.

    Options (the fields of JobSpec): ``kwargs`` (the job's keyword arguments), ``queue``,
    ``priority`` (-100..100, higher runs first), ``run_at`` (aware datetime) or ``delay``
    (seconds or timedelta), ``max_attempts``, ``unique_key``, ``using`` (database alias),
    ``concurrency_key`` and ``concurrency_limit`` (over the job's own: at most that many
    jobs of the key run at once; docs/flow-control.rst), ``batch`` (a Batch or its id:
    the job joins it; inside ``with batch(...)`` it joins that one), ``after`` (jobs or
    ids: it runs once they have all succeeded; inside ``with after(...)``, those) and
    ``after_failure`` ("cancel", the default, or "run": what it does when one of them
    fails; docs/workflows.rst).

    With ``unique_key``, if a READY or RUNNING job of the same name has that key,
    nothing is written and that job is returned instead.
    """
    spec = JobSpec.of("enqueue", args, options, ENQUEUE_OPTIONS)
    return producing.send(lambda trace: _enqueue(job, args, kwargs, spec.traced(trace)), producing.single)


def _enqueue(job: JobTarget, args: tuple, kwargs: dict[str, Any] | None, spec: JobSpec) -> Job:
    fields, using = job_fields(job, args, kwargs, spec)
    return store_new(fields, using, spec)[0]


def store_new(fields: dict[str, Any], using: str, spec: JobSpec) -> tuple[Job, bool]:
    """Build and store() a job from validated `fields`, in the batch `spec` names and waiting
    for the jobs it names, or those of the open ``batch()`` and ``after()`` blocks."""
    batch_id = workflow_options.batch_of(spec.batch, using)
    upstream, run_on_failure = workflow_options.waits(spec.after, spec.after_failure)
    if batch_id is None and not upstream:
        return store(rows.build(fields, using), fields, using)
    workflow_cycles.refuse(using, batch_id, upstream)
    return _store_in_workflow(fields, using, batch_id, upstream, run_on_failure)


def _store_in_workflow(
    fields: dict[str, Any], using: str, batch_id: str | None, upstream: list[str], run_on_failure: bool
) -> tuple[Job, bool]:
    """store() a job that joins a batch or waits for other jobs, with its bookkeeping, atomically.

    Outside a transaction, a deadlock with a worker storing an outcome is retried (nothing
    else: after a lost commit answer the job may have been stored).
    """
    for attempt in range(3):
        try:
            with transaction.atomic(using=using):
                return _store_with_bookkeeping(dict(fields), using, batch_id, upstream, run_on_failure)
        except OperationalError as exc:
            # Only a lost lock conflict: after a lost commit answer the job may be stored.
            if attempt == 2 or not db.is_lock_conflict(exc) or connections[using].in_atomic_block:
                raise
    raise AssertionError("unreachable")


def _store_with_bookkeeping(
    fields: dict[str, Any], using: str, batch_id: str | None, upstream: list[str], run_on_failure: bool
) -> tuple[Job, bool]:
    # The jobs waited for first, then the batch: the order an outcome's bookkeeping locks in.
    pending: set[str] = set()
    failed: list[str] = []
    if upstream:
        pending, failed = workflow_options.wait_for(using, upstream)
        fields.update(workflow_options.waiting_fields(pending, failed, run_on_failure))
    if batch_id is not None:
        workflow_options.join(using, batch_id, 1)
        fields["batch_id"] = batch_id
    instance, created = store(rows.build(fields, using), fields, using)
    if not created:  # its unique_key's holder was returned: it joins and waits for nothing
        if batch_id is not None:
            workflow_options.join(using, batch_id, -1)
        return instance, False
    if upstream:
        workflow_options.link(using, [instance], upstream, pending, failed, run_on_failure)
    return instance, True


def store(instance: Job, fields: dict[str, Any], using: str, quiet: bool = False) -> tuple[Job, bool]:
    """Insert a job built by rows.build() from `fields`; return it (or its key's holder) and if it is new.

    With `quiet` (the scheduler) no receiver runs inside the transaction: no save
    signals, and job_enqueued is left to the caller to send after the commit.
    """
    if instance.unique_key is not None:
        instance, created = _insert_unique(instance, using)
        if not created:
            return instance, False
    else:
        given = frozenset(fields)
        if not insert_one.insert(instance, given, using):
            inserts.insert([instance], using, signals=not quiet, given=given)
    if quiet:
        transaction.on_commit(wakeup.notify, using=using)
    else:
        _enqueued([instance], using)
    return instance, True


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


async def aenqueue(
    job: JobTarget, *args: Any, kwargs: dict[str, Any] | None = None, **options: Unpack[EnqueueOptions]
) -> Job:
    """The async twin of enqueue()."""
    return await sync_to_async(enqueue)(job, *args, kwargs=kwargs, **options)


def _enqueued(jobs: list[Job], using: str) -> None:
    receivers = has_receivers(Job, job_enqueued)
    if receivers or logger.isEnabledFor(logging.DEBUG):  # else nothing to do per job
        for instance in jobs:
            if receivers:
                job_enqueued.send(sender=Job, job=instance)
            logger.debug(
                "Job enqueued id=%s name=%s queue=%s",
                instance.pk,
                instance.name,
                instance.queue,
                extra=log_fields.for_job(instance),
            )
    connections[using].on_commit(wakeup.notify)  # transaction.on_commit(), one lookup fewer
