"""batch(): open a batch, enqueue its jobs, and have callbacks run once all have finished."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import router, transaction

from ..enqueuing import api, rows
from ..enqueuing.spec import JobSpec
from ..enqueuing.workflow_options import open_batch
from ..exceptions import InvalidJob
from ..models import Batch, Blocked, Job, settling
from ..observability import producing

#: Longest batch description.
MAX_DESCRIPTION = 255
CALLBACKS = ("on_success", "on_failure", "on_complete")


@contextmanager
def batch(
    *,
    on_success: Any = None,
    on_failure: Any = None,
    on_complete: Any = None,
    description: str = "",
    using: str | None = None,
) -> Iterator[Batch]:
    """Open a batch: jobs enqueued in the block join it; callbacks run when all have finished.

    ``on_success`` runs if every job succeeded, ``on_failure`` if any failed (dead-lettered
    or cancelled), ``on_complete`` in either case; each is a job function (``@job`` or a
    registered name) and is called with one argument, the batch's summary: a dict with
    ``id``, ``description``, ``total``, ``succeeded`` and ``failed``.

    The block is one transaction (a savepoint inside the caller's): the batch and its jobs
    are committed together or not at all, and no job of it runs before. Jobs added later,
    from one of its own jobs (``enqueue(..., batch=current_job().batch_id)``), count too.
    """
    using = using or router.db_for_write(Job)
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise InvalidJob(f"description must be a string of at most {MAX_DESCRIPTION} characters.")
    if open_batch.get() is not None:
        raise InvalidJob("Batches do not nest: enqueue the inner jobs into the open batch.")
    targets = {"on_success": on_success, "on_failure": on_failure, "on_complete": on_complete}
    with transaction.atomic(using=using):
        # The block holds one count of its own until it ends: a job cancelled at once in it
        # (after= a dead letter, cancel()) cannot finish the batch before the rest join.
        opened = Batch.objects.using(using).create(description=description, total=1)
        for kind, target in targets.items():
            if target is not None:
                setattr(opened, kind, _waiting_callback(target, using).pk)
        if any(targets.values()):
            opened.save(using=using, update_fields=[kind for kind in CALLBACKS if targets[kind]])
        token = open_batch.set((using, opened.pk))
        try:
            yield opened
        finally:
            open_batch.reset(token)
        settling.close(Job, using, opened.pk)  # finished now if nothing is left to wait for
        opened.refresh_from_db(using=using)


def _waiting_callback(target: Any, using: str) -> Job:
    """Store a batch's callback job, waiting (Blocked.AFTER) until the batch finishes."""
    return producing.send(lambda trace: _store_callback(target, using, trace), producing.single, link=True)


def _store_callback(target: Any, using: str, trace: dict | None) -> Job:
    fields, using = api.job_fields(target, ({},), None, JobSpec(using=using, trace_context=trace))
    fields.update(blocked=Blocked.AFTER, waiting_for=1)
    return api.store(rows.build(fields, using), fields, using)[0]
