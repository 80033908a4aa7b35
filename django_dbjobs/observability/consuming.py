"""The CONSUMER span of a job's run (``process <queue>``), and the outcome recorded on it.

install() registers running() and finished() with run_hooks.py when tracing is on (a
worker's start, testing.run_jobs()). A first attempt, started soon after it was enqueued,
continues the enqueuer's trace: its span is the child of the PRODUCER span
(producing.py). A retry, a job started long after it was enqueued, or a batch callback
starts a trace of its own, linked to the producer's span (a callback also to the spans
that sent its batch's jobs). The job's own spans are children of the run's span: it is
current in the job's context, which an ``async def`` job's loop inherits.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from . import run_hooks, tracing
from .outcomes import outcome_of, timed_out

if TYPE_CHECKING:
    from ..models import Job

#: A job that starts longer than this after it was enqueued (its delay, or a backlog)
#: starts a trace of its own, linked to the enqueuer's: a trace that stays open for
#: hours or days reads as one slow request.
CONTINUE_WITHIN = datetime.timedelta(hours=1)
#: At most this many links from a batch callback to the spans that sent its batch's jobs.
MAX_BATCH_LINKS = 32

# The job whose run span is current in this context, and the span: what finished() records on.
_running: contextvars.ContextVar[tuple[str, Any] | None] = contextvars.ContextVar(
    "dbjobs_run_span", default=None
)


def install() -> None:
    """Trace every run of this process's workers from now on, if tracing is on (else nothing)."""
    if tracing.tracer() is not None:
        run_hooks.add_wrapper(running)
        run_hooks.add_listener(finished)


@contextlib.contextmanager
def running(job: Job) -> Iterator[None]:
    """Run `job` in its CONSUMER span, current for the job's own code (a run_hooks wrapper)."""
    tracer = tracing.tracer()
    if tracer is None:  # turned off since install()
        yield
        return
    from opentelemetry import trace

    parent, links = _origin(job)
    attributes = {
        "messaging.system": tracing.SYSTEM,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.pk),
        "django_dbjobs.job.name": job.name,
        "django_dbjobs.job.attempt": job.attempts,
    }
    with tracer.start_as_current_span(
        f"process {job.queue}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
    ) as span:
        token = _running.set((job.pk, span))
        try:
            yield
        finally:
            _running.reset(token)


def finished(job: Job, status: str, failure: BaseException | None) -> None:
    """Record a stored outcome on the run's span (a run_hooks listener).

    A success the worker stores with others, after the run, finds the span ended: it
    keeps the status it had, unset.
    """
    current = _running.get()
    if current is None or current[0] != job.pk:
        return
    from opentelemetry.trace import Status, StatusCode

    span = current[1]
    outcome = outcome_of(job, status, failure)
    if outcome is not None:
        span.set_attribute("django_dbjobs.job.outcome", outcome)
    if failure is None or outcome == "cancelled":  # asked to stop: an operator's choice, not an error
        return
    if timed_out(failure):  # apart from its outcome, which says what followed
        span.set_attribute("django_dbjobs.job.timed_out", True)
    kind = type(failure)
    span.set_attribute("error.type", f"{kind.__module__}.{kind.__qualname__}")
    span.record_exception(failure)
    span.set_status(Status(StatusCode.ERROR, f"{kind.__name__}: {failure}"[:200]))


def _origin(job: Job) -> tuple[Any, list]:
    """The context the run's span continues (None: a trace of its own) and the links it has."""
    from opentelemetry import context, trace

    carrier = job.trace_context
    if not carrier or not isinstance(carrier, dict):  # enqueued untraced: a trace of its own
        return context.Context(), []
    enqueuer = tracing.W3C().extract(carrier)
    sender = trace.get_current_span(enqueuer).get_span_context()
    if not sender.is_valid:
        return context.Context(), []
    if job.attempts <= 1 and not carrier.get(tracing.LINK) and not _late(job):
        return enqueuer, []
    links = [trace.Link(sender, {"django_dbjobs.link": "enqueue"})]
    if carrier.get(tracing.LINK):
        links += _batch_links(job, sender)
    return context.Context(), links


def _late(job: Job) -> bool:
    enqueued = job.enqueued_at
    return isinstance(enqueued, datetime.datetime) and timezone.now() - enqueued > CONTINUE_WITHIN


def _batch_links(job: Job, sender: Any) -> list:
    """Links to the spans that sent the jobs of the batch `job` is a callback of (its summary's id)."""
    from opentelemetry import trace

    summary = job.args[0] if job.args and isinstance(job.args[0], dict) else {}
    if not summary.get("id"):
        return []
    contexts = (
        type(job)
        ._base_manager.using(job._state.db)
        .filter(batch_id=summary["id"], trace_context__isnull=False)
        .values_list("trace_context", flat=True)[: MAX_BATCH_LINKS * 8]
    )
    seen, links = {sender.span_id}, []
    for carrier in contexts:
        if not isinstance(carrier, dict):
            continue
        member = trace.get_current_span(tracing.W3C().extract(carrier)).get_span_context()
        if member.is_valid and member.span_id not in seen and len(links) < MAX_BATCH_LINKS:
            seen.add(member.span_id)
            links.append(trace.Link(member, {"django_dbjobs.link": "batch"}))
    return links
