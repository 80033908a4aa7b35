"""bulk_enqueue() and enqueue_many(): many jobs in as few INSERTs as possible, in one transaction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.db import connections, router, transaction
from django.db.models.signals import post_init, pre_init

from .. import db, registry
from ..db import copy_rows, insert_rows
from ..exceptions import InvalidJob, InvalidJobArguments
from ..flow import keys
from ..models import Blocked, Job
from ..models.states import rated_queues
from ..observability import producing
from ..signals import has_receivers, job_enqueued
from . import inserts, rows, validation, workflow_cycles, workflow_options
from .api import JobTarget, _enqueued, common_fields, prepared
from .clock_once import clock_values
from .spec import ENQUEUE_MANY_OPTIONS, EnqueueManyOptions, JobSpec

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11


def bulk_enqueue(
    jobs: Iterable[Job],
    batch_size: int = 1000,
    batch: Any = None,
    after: Any = None,
    after_failure: str | None = None,
) -> list[Job]:
    """Store many prepared jobs with bulk_create, in as few INSERTs as batch_size allows.

    Pass jobs made by prepare(); all go to the database of the first one. Every job
    is validated before anything is written. With `batch` (a Batch or its id), or inside
    ``with batch(...)``, they join that batch; with `after` (or inside ``with after(...)``)
    each waits for those jobs, as enqueue()'s option says.
    """
    jobs = list(jobs)
    if not jobs:
        return []
    return producing.send(
        lambda trace: _bulk_enqueue(jobs, batch_size, batch, after, after_failure, trace), list, many=True
    )


def _bulk_enqueue(
    jobs: list[Job], batch_size: int, batch: Any, after: Any, after_failure: str | None, trace: dict | None
) -> list[Job]:
    """bulk_enqueue(), the jobs sent with the trace context `trace` (None: as they are)."""
    for instance in jobs:
        if not isinstance(instance, Job) or instance._state.adding is False:
            raise TypeError("bulk_enqueue() takes unsaved jobs made by prepare().")
        if instance.unique_key is not None:
            raise InvalidJob("bulk_enqueue() does not take unique_key; use enqueue() for unique jobs.")
        _flow_state(instance)
        if trace is not None:
            instance.trace_context = trace
    using = jobs[0]._state.db or router.db_for_write(Job)
    batch_id = workflow_options.batch_of(batch, using)
    upstream, run_on_failure = workflow_options.waits(after, after_failure)
    workflow_cycles.refuse(using, batch_id, upstream, many=True)
    with transaction.atomic(using=using):
        waits = _Waits(using, upstream, run_on_failure)
        for field, value in waits.fields.items():
            for instance in jobs:
                setattr(instance, field, value)
        if batch_id is not None:
            workflow_options.join(using, batch_id, len(jobs))
            for instance in jobs:
                instance.batch_id = batch_id
        inserts.insert(jobs, using, batch_size=batch_size)
        waits.link(jobs)
        _enqueued(jobs, using)
    return jobs


class _Waits:
    """What the jobs of one bulk call wait for: their fields, then their dependency rows."""

    def __init__(self, using: str, upstream: list[str], run_on_failure: bool):
        self.using, self.upstream, self.run_on_failure = using, upstream, run_on_failure
        self.pending: set[str] = set()
        self.failed: list[str] = []
        self.fields: dict[str, Any] = {}
        if upstream:
            self.pending, self.failed = workflow_options.wait_for(using, upstream)
            self.fields = workflow_options.waiting_fields(self.pending, self.failed, run_on_failure)

    def link(self, jobs: list[Job]) -> None:
        if self.upstream:
            workflow_options.link(
                self.using, jobs, self.upstream, self.pending, self.failed, self.run_on_failure
            )


def _flow_state(instance: Job) -> None:
    """Make a job built by hand (not by prepare()) wait as flow control says: for a slot of
    its concurrency key, or for its queue's rate."""
    if instance.blocked != Blocked.NONE:
        return
    if instance.concurrency_key is not None:
        instance.concurrency_key, instance.concurrency_limit = keys.resolve(
            None, None, instance.concurrency_key, instance.concurrency_limit, None, (), {}
        )
        instance.blocked = Blocked.CONCURRENCY
    elif instance.queue in rated_queues():
        instance.blocked = Blocked.RATE


def enqueue_many(
    job: JobTarget,
    arguments: Iterable[tuple | list],
    *,
    batch_size: int = 1000,
    **options: Unpack[EnqueueManyOptions],
) -> list[Job]:
    """Enqueue `job` once per item of `arguments`, each a tuple of positional arguments.

    The fastest way to store many jobs of one kind: the options are validated once,
    each item's arguments on their own, all before anything is written; the rows go
    in as few INSERTs as batch_size allows, in one transaction. For jobs that differ
    in more than their positional arguments, use prepare() and bulk_enqueue().

    ``enqueue_many(send_welcome, [(1,), (2,), (3,)])`` stores three jobs. With `batch`
    (a Batch or its id), or inside ``with batch(...)``, they join that batch; with `after`
    (or inside ``with after(...)``) each waits for those jobs, as enqueue()'s option says.
    """
    spec = JobSpec.of("enqueue_many", (), options, ENQUEUE_MANY_OPTIONS)
    items = list(arguments)
    for index, item in enumerate(items):
        if not isinstance(item, tuple | list):
            raise InvalidJobArguments(
                f"arguments[{index}] is a {type(item).__name__}; each item must be a tuple of "
                "positional arguments, such as (user_id,)."
            )
    return producing.send(
        lambda trace: _enqueue_many(job, items, batch_size, spec.traced(trace)), list, many=True
    )


def _enqueue_many(job: JobTarget, items: list, batch_size: int, spec: JobSpec) -> list[Job]:
    registered = registry.resolve(job)
    if registered.options.concurrency_key is not None:  # a key per item: made as prepare() makes it
        jobs = []
        for index, item in enumerate(items):
            try:
                jobs.append(prepared(registered, item, None, spec))
            except InvalidJob as exc:
                raise type(exc)(f"arguments[{index}]: {exc}") from None
        # Sent with the spec's trace context, in this call's span: not a span of its own.
        return _bulk_enqueue(jobs, batch_size, spec.batch, spec.after, spec.after_failure, None)
    common, using = common_fields(registered, spec)
    reject_nul = db.rejects_nul(using)
    each, texts = [], []
    for index, item in enumerate(items):
        try:
            args, text = validation.positional_payload(item, reject_nul)
            registered.check_arguments(args, {})
        except InvalidJobArguments as exc:
            raise type(exc)(f"arguments[{index}]: {exc}") from None
        each.append({"args": args, "kwargs": {}})
        texts.append(text)
    batch_id = workflow_options.batch_of(spec.batch, using)
    if batch_id is not None:
        common["batch_id"] = batch_id
    upstream, run_on_failure = workflow_options.waits(spec.after, spec.after_failure)
    if not each:
        return []
    given = frozenset(common)  # args and kwargs included
    shared = given - {"args"}  # every job's kwargs are {}: sent once; each one's args as validated
    if batch_id is None and not upstream and _one_statement(using, len(each), batch_size, texts):
        jobs = rows.build_many(common, each, using)
        inserts.insert(jobs, using, batch_size, given=given, shared=shared, texts={"args": texts}, copy=False)
        _enqueued(jobs, using)
        return jobs
    workflow_cycles.refuse(using, batch_id, upstream, many=True)
    with transaction.atomic(using=using):
        waits = _Waits(using, upstream, run_on_failure)
        common.update(waits.fields)
        if batch_id is not None:
            workflow_options.join(using, batch_id, len(each))
        given = frozenset(common)  # args and kwargs included, and what the jobs wait for
        jobs = _build_and_insert(common, each, using, batch_size, given, given - {"args"}, {"args": texts})
        waits.link(jobs)
        _enqueued(jobs, using)
    return jobs


def _one_statement(using: str, rows: int, batch_size: int, texts: list[str]) -> bool:
    """Whether enqueue_many()'s jobs go in by one INSERT in the caller's autocommit, a
    transaction of its own (db/insert_rows.py one_statement() says where), no job_enqueued
    receiver having to run inside the transaction (docs/reference/signals.rst). A
    transaction's BEGIN and COMMIT (on PostgreSQL also a COPY's two round trips and the
    read of the clock before it) cost a call of 100 jobs a third of its time."""
    if has_receivers(Job, job_enqueued):
        return False
    return insert_rows.one_statement(connections[using], rows, batch_size, texts)


def _build_and_insert(
    common: dict,
    each: list[dict],
    using: str,
    batch_size: int,
    given: frozenset,
    shared: frozenset,
    texts: dict,
) -> list[Job]:
    """rows.build_many() then inserts.insert(); by COPY (PostgreSQL), the jobs are built a
    chunk at a time while the server stores the rows before (inserts.build_and_copy()),
    unless Job has init signal receivers: user code, which must not run while the COPY
    holds the connection (a query of its own there would wait for it forever)."""
    connection = connections[using]
    if not copy_rows.usable(connection, len(each)) or has_receivers(Job, pre_init, post_init):
        jobs = rows.build_many(common, each, using)
        inserts.insert(jobs, using, batch_size=batch_size, given=given, shared=shared, texts=texts)
        return jobs
    with transaction.mark_for_rollback_on_error(using):
        clock, shape = clock_values(connection, inserts.made_shape(given, shared))
        jobs = inserts.build_and_copy(connection, {**common, **clock}, each, shape, texts)
    inserts.stored(jobs, using)
    return jobs
