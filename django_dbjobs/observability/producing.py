"""The PRODUCER span of an enqueue, and the W3C trace context it hands to the jobs it stores.

Every way in (enqueue(), enqueue_many(), bulk_enqueue(), the ``django.tasks`` backend, a
schedule firing, a batch's callbacks) stores its jobs through send(): with tracing off it
only calls the store; on, the store runs in a span ``send <queue>`` (messaging semantic
conventions) and is given that span's context, injected by the global propagator, to save
in ``Job.trace_context``. A job's run continues or links to it (consuming.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from . import tracing

if TYPE_CHECKING:
    from ..models import Job

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
    from opentelemetry import propagate, trace

    with tracer.start_as_current_span("send", kind=trace.SpanKind.PRODUCER, attributes=_SEND) as span:
        carrier: Carrier = {}
        propagate.inject(carrier)
        if link:
            carrier[tracing.LINK] = True
        stored = store(carrier)
        describe(span, jobs_of(stored), many)
        return stored


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
