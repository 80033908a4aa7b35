"""The PRODUCER span of an enqueue, and the W3C trace context it hands to the jobs it stores.

Every way in (enqueue(), enqueue_many(), bulk_enqueue(), the ``django.tasks`` backend, a
schedule firing, a batch's callbacks) stores its jobs through send(): with tracing off it
only calls the store; on, the store runs in a span ``send <queue>`` (messaging semantic
conventions) and is given that span's W3C context (traceparent and tracestate) to save
in ``Job.trace_context``. A job's run continues or links to it (consuming.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from . import tracing

if TYPE_CHECKING:
    from ..models import Job

logger = logging.getLogger("django_dbjobs")

Stored = TypeVar("Stored")

#: Where a job's trace context says it was sent from, beside the W3C fields.
Carrier = dict[str, Any]

_SEND = {
    "messaging.system": tracing.SYSTEM,
    "messaging.operation.name": "send",
    "messaging.operation.type": "send",
}


def send(
    store: Callable[[Carrier | None], Stored],
    jobs_of: Callable[[Stored], Sequence[Job]],
    *,
    many: bool = False,
    link: bool = False,
) -> Stored:
    """Return ``store(carrier)``, in a PRODUCER span when tracing is on (else carrier is None).

    `jobs_of` names the jobs the store returned, to describe the span; `many` says the
    call sends any number of jobs (enqueue_many()); with `link` their runs link to the
    span instead of continuing its trace.
    """
    tracer = tracing.tracer()
    if tracer is None:
        return store(None)
    from opentelemetry import trace

    # Tracing is ours around the caller's write: whatever it raises is logged and the jobs go
    # untraced, never a failed enqueue (a caller retrying it would enqueue the jobs twice).
    try:
        opened = tracer.start_as_current_span("send", kind=trace.SpanKind.PRODUCER, attributes=_SEND)
        span = opened.__enter__()
    except Exception:  # noqa: BLE001
        logger.exception("Tracing could not start the span of an enqueue; its jobs go untraced")
        return store(None)
    try:
        stored = store(_carrier(link))
    except BaseException as exc:
        _leave(opened, exc)
        raise
    try:
        describe(span, jobs_of(stored), many)
    except Exception:  # noqa: BLE001
        logger.exception("Tracing could not describe the span of an enqueue")
    _leave(opened, None)
    return stored


def _carrier(link: bool) -> Carrier | None:
    """The current span's W3C context (traceparent, tracestate), as stored with the jobs.

    The W3C propagator only, whatever the project's global one: baggage (which may hold
    personal data, and any amount of it) never lands in the job table, and a run can
    always read what was stored.
    """
    try:
        carrier: Carrier = {}
        tracing.W3C().inject(carrier)
    except Exception:  # noqa: BLE001
        logger.exception("Tracing could not read the trace context of an enqueue; its jobs go untraced")
        return None
    if len(carrier.get("tracestate", "")) > tracing.MAX_TRACESTATE:
        del carrier["tracestate"]  # vendor data beyond the W3C limit: the trace id is what matters
    if not carrier:
        return None
    if link:
        carrier[tracing.LINK] = True
    return carrier


def _leave(opened: Any, exc: BaseException | None) -> None:
    try:
        opened.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
    except Exception:  # noqa: BLE001
        logger.exception("Tracing could not end the span of an enqueue")


def single(job: Job) -> list[Job]:
    """The jobs_of of a store that returns one job."""
    return [job]


def first(stored: tuple[Job, bool]) -> list[Job]:
    """The jobs_of of a store that returns (job, whether it is new)."""
    return [stored[0]]


def describe(span: Any, jobs: Sequence[Job], many: bool) -> None:
    """Name `span` for the queue its jobs went to, and give it their id, name and count."""
    queues = {job.queue for job in jobs}
    names = {job.name for job in jobs}
    if len(queues) == 1:
        queue = queues.pop()
        span.update_name(f"send {queue}")
        span.set_attribute("messaging.destination.name", queue)
    if len(names) == 1:
        span.set_attribute("django_dbjobs.job.name", names.pop())
    if many:
        span.set_attribute("messaging.batch.message_count", len(jobs))
    elif len(jobs) == 1:
        span.set_attribute("messaging.message.id", str(jobs[0].pk))
