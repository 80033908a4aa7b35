"""SuccessBatch: successes stored together, one fenced UPDATE per batch."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ...conf import settings
from ...db.outage import Outage
from ...enqueuing import enqueuer_context
from ...models import Job, JobStatus
from ...observability import log_fields
from . import execution

logger = logging.getLogger("django_dbjobs")


class SuccessBatch:
    """Successes a worker's threads reported, waiting to be stored together.

    A success waits at most DBJOBS_ACK_DELAY here. If the worker dies first, the sweep
    gives the job back uncharged (it may not have run, as far as the database knows)
    and it runs again: at least once, never lost, never dead-lettered for it.
    """

    def __init__(
        self,
        worker_id: str,
        using: str,
        wake: threading.Event,
        outage: Outage,
        on_not_stored: Callable[[], None] = lambda: None,
    ):
        self.worker_id = worker_id
        self.using = using
        self.wake = wake
        self.outage = outage
        self.on_not_stored = on_not_stored
        self._items: list[tuple[Job, Any]] = []
        self._since = 0.0
        self._lock = threading.Lock()

    def add(self, job: Job, value: Any) -> None:
        """Queue a success (called on the job's thread); wake the worker when the batch starts
        (its wait must end by the batch's due time) and when it is full."""
        with self._lock:
            first = not self._items
            if first:
                self._since = time.monotonic()
            self._items.append((job, value))
            full = len(self._items) >= settings.ACK_BATCH_SIZE
        if first or full:
            self.wake.set()

    def pending_ids(self) -> set[str]:
        """Ids of the jobs whose success waits here, still RUNNING in the database."""
        with self._lock:
            return {job.pk for job, _value in self._items}

    def due_in(self) -> float | None:
        """Seconds until the batch must be stored, or None when it is empty."""
        with self._lock:
            if not self._items:
                return None
            return max(0.0, self._since + settings.ACK_DELAY - time.monotonic())

    def flush(self, force: bool = False) -> None:
        """Store the batch if it is full, due, or `force`d; report each outcome.

        Outages are waited out (a forced stop ends the wait: the jobs stay RUNNING and
        are released or recovered). A batch the database refuses for one job's value
        is stored again job by job, so only that job fails.
        """
        with self._lock:
            if not self._items:
                return
            due = time.monotonic() - self._since >= settings.ACK_DELAY
            if not (force or due or len(self._items) >= settings.ACK_BATCH_SIZE):
                return
            batch, self._items = self._items, []
        for chunk in _chunks(batch):
            self._store(chunk)

    def _store(self, batch: list[tuple[Job, Any]]) -> None:
        try:
            won = self.outage.call(
                lambda: Job.objects.using(self.using).finish_successes(self.worker_id, batch),
                "storing finished jobs",
            )
        except Exception as exc:  # noqa: BLE001 - a value the database refused (see db/outage.py)
            logger.warning(
                "A batch of successes was refused (%s); storing its %s jobs one by one",
                exc,
                len(batch),
                extra=log_fields.for_count(len(batch)),
            )
            for job, value in batch:
                try:
                    with enqueuer_context.restoring_safely(job.context):
                        execution.store_success(job, self.worker_id, value, self.outage)
                except Exception:  # noqa: BLE001 - every record refused: give the job back
                    logger.exception(
                        "Could not store the outcome of job id=%s; it will be given back",
                        job.pk,
                        extra=log_fields.for_job(job),
                    )
                    self.on_not_stored()
            return
        if won is None:
            logger.warning(
                "Successes not stored before a forced stop count=%s",
                len(batch),
                extra=log_fields.for_count(len(batch)),
            )
            return
        stored = {job.pk for job in won}
        for job, _value in batch:
            if job.pk not in stored:
                logger.warning(
                    "Job outcome dropped: this worker no longer owns it id=%s name=%s status=SUCCESSFUL",
                    job.pk,
                    job.name,
                    extra=log_fields.for_job(job),
                )
            elif not (job.context or settings.CONTEXT_RESTORE):  # the common case, and the cheapest
                execution.finished(job, JobStatus.SUCCESSFUL)
            else:
                with enqueuer_context.restoring_safely(job.context) as refused:
                    if refused is not None:
                        logger.error(
                            "DBJOBS_CONTEXT_RESTORE raised; signalling the success of job id=%s without "
                            "its context: %r",
                            job.pk,
                            refused,
                            extra=log_fields.for_job(job),
                        )
                    execution.finished(job, JobStatus.SUCCESSFUL)


#: Most bytes of return values stored in one UPDATE: well under MySQL's smallest usual
#: max_allowed_packet, so a batch of large values never breaks the connection.
MAX_BATCH_BYTES = 1_048_576


_SCALARS = frozenset({type(None), bool, int, float})


def _chunks(batch: list[tuple[Job, Any]]) -> list[list[tuple[Job, Any]]]:
    """Split a batch so that no UPDATE carries more than MAX_BATCH_BYTES of return values."""
    weights = [0 if type(value) in _SCALARS else _weight(value) for _job, value in batch]
    if sum(weights) <= MAX_BATCH_BYTES:
        return [batch]
    chunks: list[list[tuple[Job, Any]]] = [[]]
    size = 0
    for item, weight in zip(batch, weights, strict=True):
        if chunks[-1] and size + weight > MAX_BATCH_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += weight
    return chunks


def _weight(value: Any) -> int:
    if isinstance(value, str):
        return len(value) * 4
    try:
        return len(json.dumps(value, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError):
        return 0  # not JSON: the database write refuses it, job by job
