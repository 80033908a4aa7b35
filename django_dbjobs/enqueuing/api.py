"""enqueue(), aenqueue() and prepare(): put jobs in the table (bulk.py: many at once).

A job's own keyword arguments go in ``kwargs={...}``; every other keyword is an
enqueue option. So a job with a parameter called ``queue`` or ``priority`` can never
have it mistaken for an option.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, OperationalError, connections, router, transaction

from .. import db, registry
from ..conf import settings
from ..exceptions import UnknownOption
from ..flow import keys
from ..models import Blocked, Job
from ..models.states import rated_queues
from ..registry import discovery
from ..registry.registered import RegisteredJob
from ..signals import has_receivers, job_enqueued
from . import (
    enqueuer_context,
    insert_one,
    inserts,
    rows,
    unserved_queues,
    validation,
    wakeup,
    workflow_cycles,
    workflow_options,
)

logger = logging.getLogger("django_dbjobs")

JobTarget = RegisteredJob | Callable | str


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
    concurrency_key: str | None = None,
    concurrency_limit: int | None = None,
    **unknown: Any,
) -> Job:
    """Validate a job and return it as an unsaved Job, ready for bulk_enqueue().

    Raises an InvalidJob subclass naming the bad argument; nothing is written.
    """
    _refuse_unknown_options("prepare", args, unknown)
    fields, using = job_fields(
        job,
        args,
        kwargs,
        queue,
        priority,
        run_at,
        delay,
        max_attempts,
        unique_key,
        using,
        concurrency_key=concurrency_key,
        concurrency_limit=concurrency_limit,
    )
    return rows.remember_build(rows.build(fields, using), fields)


def job_fields(
    job,
    args,
    kwargs,
    queue,
    priority,
    run_at,
    delay,
    max_attempts,
    unique_key,
    using,
    check_signature=True,
    capture=True,
    concurrency_key=None,
    concurrency_limit=None,
):
    """The validated field values of a new job, and the database it goes to (InvalidJob if invalid).

    With `capture`, the enqueuer's context (language, timezone, DBJOBS_CONTEXT_CAPTURE)
    goes with the job; a scheduler's jobs have no enqueuer.
    """
    registered = registry.resolve(job)
    discovery.warn_if_unimported(registered)
    using = using or router.db_for_write(Job)
    reject_nul = db.rejects_nul(using)
    clean_args, clean_kwargs = validation.payload(args, kwargs or {}, reject_nul)
    if check_signature:
        registered.check_arguments(clean_args, clean_kwargs)
    queue, priority, max_attempts = _options(registered, queue, priority, max_attempts)
    unserved_queues.warn_if_unserved(queue, using)
    fields = {
        "name": registered.name,
        "args": clean_args,
        "kwargs": clean_kwargs,
        "queue": queue,
        "priority": priority,
        "max_attempts": max_attempts,
    }
    if unique_key is not None:
        fields["unique_key"] = fields["active_key"] = validation.unique_key(unique_key, reject_nul)
    options = registered.options
    key, limit = keys.resolve(
        registered.func,
        options.concurrency_key,
        concurrency_key,
        options.concurrency_limit if concurrency_limit is None else concurrency_limit,
        registered.default_concurrency_limit,
        clean_args,
        clean_kwargs,
    )
    if key is not None:
        # Not claimable until the admission gives it one of its key's slots (flow/admission.py).
        fields.update(concurrency_key=key, concurrency_limit=limit, blocked=Blocked.CONCURRENCY)
    elif queue in rated_queues():  # claimed only within its queue's rate (flow/rates.py)
        fields["blocked"] = Blocked.RATE
    when = validation.run_at(run_at, delay)
    if when is not None:
        fields["run_at"] = when
    if capture:
        context = enqueuer_context.capture()
        if context is not None:
            fields["context"] = context
    return fields, using


def _options(registered: RegisteredJob, queue: Any, priority: Any, max_attempts: Any) -> tuple[str, int, int]:
    """The job's queue, priority and maximum attempts: as given, else the job's own, else the
    settings'; validated (InvalidJob). Kept per combination, types included (True is not 1)."""
    key = (registered, queue, type(queue), priority, type(priority), max_attempts, type(max_attempts))
    try:
        found = _validated_options.get(key)
    except TypeError:  # an unhashable value, and so an invalid one: refused below
        found, key = None, None
    if found is None:
        defaults = registered.options
        found = (
            validation.queue(_first(queue, defaults.queue, settings.DEFAULT_QUEUE)),
            validation.priority(_first(priority, defaults.priority, settings.DEFAULT_PRIORITY)),
            validation.max_attempts(
                _first(max_attempts, defaults.max_attempts, settings.DEFAULT_MAX_ATTEMPTS)
            ),
        )
        if key is not None:
            if len(_validated_options) >= 1024:
                _validated_options.clear()
            _validated_options[key] = found
    return found


#: _options()'s results; read again when the settings change (override_settings).
_validated_options: dict[tuple, tuple[str, int, int]] = {}
settings.on_reload(_validated_options.clear)


def enqueue(
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
    concurrency_key: str | None = None,
    concurrency_limit: int | None = None,
    batch: Any = None,
    after: Any = None,
    after_failure: str | None = None,
    **unknown: Any,
) -> Job:
    """Store a job to run `job(*args, **kwargs)` in a worker, and return it.

    Inside ``transaction.atomic`` the row joins the caller's transaction; workers in
    this process are woken when it commits, never on rollback.

    Options: ``kwargs`` (the job's keyword arguments), ``queue``, ``priority``
    (-100..100, higher runs first), ``run_at`` (aware datetime) or ``delay``
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
    _refuse_unknown_options("enqueue", args, unknown)
    fields, using = job_fields(
        job,
        args,
        kwargs,
        queue,
        priority,
        run_at,
        delay,
        max_attempts,
        unique_key,
        using,
        concurrency_key=concurrency_key,
        concurrency_limit=concurrency_limit,
    )
    return store_new(fields, using, batch=batch, after=after, after_failure=after_failure)[0]


def store_new(
    fields: dict[str, Any], using: str, batch: Any = None, after: Any = None, after_failure: str | None = None
) -> tuple[Job, bool]:
    """Build and store() a job from validated `fields`, in its batch and waiting for the jobs
    `after` names, or those of the open ``batch()`` and ``after()`` blocks."""
    batch_id = workflow_options.batch_of(batch, using)
    upstream, run_on_failure = workflow_options.waits(after, after_failure)
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


async def aenqueue(job: JobTarget, *args: Any, **options: Any) -> Job:
    """The async twin of enqueue()."""
    return await sync_to_async(enqueue)(job, *args, **options)


def _enqueued(jobs: list[Job], using: str) -> None:
    receivers = has_receivers(Job, job_enqueued)
    if receivers or logger.isEnabledFor(logging.DEBUG):  # else nothing to do per job
        for instance in jobs:
            if receivers:
                job_enqueued.send(sender=Job, job=instance)
            logger.debug("Job enqueued id=%s name=%s queue=%s", instance.pk, instance.name, instance.queue)
    connections[using].on_commit(wakeup.notify)  # transaction.on_commit(), one lookup fewer


def _refuse_unknown_options(function: str, args: tuple, unknown: dict[str, Any]) -> None:
    """Say how to pass a job's keyword arguments when they were given as options."""
    if not unknown:
        return
    names = ", ".join(sorted(unknown))
    given = ", ".join(
        [*(repr(a) for a in args[:3]), f"kwargs={{{', '.join(f'{k!r}: ...' for k in unknown)}}}"]
    )
    raise UnknownOption(
        f"{function}() has no option {names}. The job's own keyword arguments go in kwargs={{...}}: "
        f"{function}(job, {given})."
    )


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)
