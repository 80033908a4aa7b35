"""Traces: a request's trace continues into the job it enqueued; retries, failures and outcomes recorded."""

import datetime

import pytest
from django.test import Client, override_settings
from django.utils import timezone
from opentelemetry.trace import SpanKind, StatusCode

from django_dbjobs import enqueue
from django_dbjobs.models import Job
from django_dbjobs.testing import run_jobs
from django_dbjobs.worker import Worker
from tests.jobs import (
    always_fails,
    async_opens_a_span,
    cancels_itself,
    fails_until_attempt,
    opens_a_span,
    spins_forever,
)

pytestmark = pytest.mark.django_db


def of_kind(spans, kind: SpanKind) -> list:
    return [span for span in spans.get_finished_spans() if span.kind == kind]


def named(spans, name: str):
    (span,) = [span for span in spans.get_finished_spans() if span.name == name]
    return span


def test_a_traced_request_continues_into_the_job_it_enqueued(spans):
    from opentelemetry import trace
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumentor = DjangoInstrumentor()
    instrumentor.instrument(tracer_provider=trace.get_tracer_provider())
    try:
        response = Client().get("/enqueue/")
    finally:
        instrumentor.uninstrument()
    job = Job.objects.get(pk=response.json()["id"])
    run_jobs()
    (request,) = of_kind(spans, SpanKind.SERVER)
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    (process,) = of_kind(spans, SpanKind.CONSUMER)
    inside = named(spans, "inside")
    assert send.parent.span_id == request.context.span_id
    assert process.parent.span_id == send.context.span_id
    assert inside.parent.span_id == process.context.span_id
    assert {s.context.trace_id for s in (request, send, process, inside)} == {request.context.trace_id}
    assert job.trace_context["traceparent"].split("-")[2] == f"{send.context.span_id:016x}"
    assert (send.name, process.name) == ("send default", "process default")
    assert dict(send.attributes) == {
        "messaging.system": "django_dbjobs",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": "default",
        "messaging.message.id": job.pk,
        "django_dbjobs.job.name": "tests.jobs.opens_a_span",
    }
    assert dict(process.attributes) == {
        "messaging.system": "django_dbjobs",
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": job.pk,
        "django_dbjobs.job.name": "tests.jobs.opens_a_span",
        "django_dbjobs.job.attempt": 1,
        "django_dbjobs.job.outcome": "succeeded",
    }
    assert process.status.status_code == StatusCode.UNSET and not process.links


def test_an_async_jobs_own_spans_are_children_of_its_run(spans):
    enqueue(async_opens_a_span, "inside async")
    run_jobs()
    (process,) = of_kind(spans, SpanKind.CONSUMER)
    inside = named(spans, "inside async")
    assert inside.parent.span_id == process.context.span_id
    assert inside.context.trace_id == process.context.trace_id


def test_a_retry_starts_a_trace_of_its_own_linked_to_the_enqueue(spans):
    job = enqueue(fails_until_attempt, 2)
    run_jobs(include_scheduled=True)
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    first, second = of_kind(spans, SpanKind.CONSUMER)
    assert first.parent.span_id == send.context.span_id
    assert first.attributes["django_dbjobs.job.outcome"] == "retried"
    assert first.attributes["error.type"] == "builtins.ConnectionError"
    assert first.status.status_code == StatusCode.ERROR
    (event,) = first.events
    assert event.name == "exception" and event.attributes["exception.type"] == "ConnectionError"
    assert second.parent is None and second.context.trace_id != send.context.trace_id
    assert [link.context.span_id for link in second.links] == [send.context.span_id]
    assert second.links[0].attributes["django_dbjobs.link"] == "enqueue"
    assert second.attributes["django_dbjobs.job.attempt"] == 2
    assert second.attributes["django_dbjobs.job.outcome"] == "succeeded"
    assert Job.objects.get(pk=job.pk).status == "SUCCESSFUL"


def test_a_dead_letter_is_recorded_with_its_exception(spans):
    enqueue(always_fails, "out of stock", max_attempts=1)
    run_jobs()
    (process,) = of_kind(spans, SpanKind.CONSUMER)
    assert process.attributes["django_dbjobs.job.outcome"] == "failed"
    assert process.status.status_code == StatusCode.ERROR
    assert "out of stock" in process.status.description
    (event,) = process.events
    assert event.attributes["exception.message"] == "out of stock"
    assert "Traceback" in event.attributes["exception.stacktrace"]


def test_a_cancelled_job_is_recorded_cancelled(spans):
    enqueue(cancels_itself)
    run_jobs()
    (process,) = of_kind(spans, SpanKind.CONSUMER)
    assert process.attributes["django_dbjobs.job.outcome"] == "cancelled"
    # Asked to stop: an operator's choice, not an error of the job.
    assert process.status.status_code == StatusCode.UNSET and "error.type" not in process.attributes


@pytest.mark.django_db(transaction=True)
def test_a_workers_timed_out_run_is_recorded_timed_out_on_each_attempt(spans):
    enqueue(spins_forever)
    for _ in range(2):  # the retry, due at once
        Job.objects.filter(status="READY").update(run_at=timezone.now() - datetime.timedelta(seconds=1))
        Worker(burst=True).run()
    first, second = of_kind(spans, SpanKind.CONSUMER)
    assert [s.attributes["django_dbjobs.job.outcome"] for s in (first, second)] == [
        "retried",
        "failed",
    ]
    assert first.attributes["django_dbjobs.job.timed_out"] is True
    assert second.attributes["django_dbjobs.job.timed_out"] is True
    assert second.attributes["error.type"] == "django_dbjobs.exceptions.JobTimeout"


def test_a_job_started_long_after_its_enqueue_links_to_it(spans):
    job = enqueue(opens_a_span, "later")
    Job.objects.filter(pk=job.pk).update(enqueued_at=timezone.now() - datetime.timedelta(hours=2))
    run_jobs()
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    (process,) = of_kind(spans, SpanKind.CONSUMER)
    assert process.parent is None and process.context.trace_id != send.context.trace_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]


def test_a_job_enqueued_untraced_runs_in_a_trace_of_its_own(spans):
    with override_settings(DBJOBS_TRACING=False):
        job = enqueue(opens_a_span, "untraced")
    assert job.trace_context is None and not spans.get_finished_spans()
    run_jobs()
    (process,) = of_kind(spans, SpanKind.CONSUMER)
    assert process.parent is None and not process.links


def test_nothing_is_stored_or_traced_without_a_provider():
    from opentelemetry import trace

    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
    job = enqueue(opens_a_span, "no provider")
    run_jobs()
    assert Job.objects.get(pk=job.pk).trace_context is None


@override_settings(DBJOBS_TRACING=False)
def test_the_setting_turns_tracing_off_with_a_provider_set(spans):
    job = enqueue(opens_a_span, "off")
    run_jobs()
    assert Job.objects.get(pk=job.pk).trace_context is None
    assert [span.name for span in spans.get_finished_spans()] == ["off"]  # the job's own only


def test_only_the_w3c_context_is_stored_never_the_callers_baggage(spans):
    from opentelemetry import baggage, context

    token = context.attach(baggage.set_baggage("user.email", "someone@example.com"))
    try:
        with trace_api().get_tracer("test").start_as_current_span("request"):
            job = enqueue(opens_a_span, "w3c")
    finally:
        context.detach(token)
    job.refresh_from_db()
    assert set(job.trace_context) == {"traceparent"}, job.trace_context
    run_jobs()
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    (process,) = of_kind(spans, SpanKind.CONSUMER)
    assert process.parent.span_id == send.context.span_id


def test_tracing_that_raises_at_enqueue_is_logged_and_the_job_is_enqueued_once_untraced(
    spans, monkeypatch, caplog
):
    from django_dbjobs.observability import tracing

    class Broken:
        def inject(self, carrier):
            raise RuntimeError("propagator down")

    monkeypatch.setattr(tracing, "W3C", Broken)
    job = enqueue(opens_a_span, "broken")
    assert Job.objects.filter(name=job.name).count() == 1
    job.refresh_from_db()
    assert job.trace_context is None
    assert "Tracing could not read the trace context of an enqueue" in caplog.text
    (send,) = of_kind(spans, SpanKind.PRODUCER)  # the span itself still ends
    assert send.attributes["messaging.message.id"] == str(job.pk)


def trace_api():
    from opentelemetry import trace

    return trace


def test_a_tracer_that_cannot_start_a_span_leaves_the_enqueue_untraced_and_done(spans, monkeypatch, caplog):
    from django_dbjobs.observability import tracing

    class Refusing:
        def start_as_current_span(self, *args, **kwargs):
            raise RuntimeError("SDK down")

    monkeypatch.setattr(tracing, "tracer", lambda: Refusing())
    job = enqueue(opens_a_span, "refused")
    job.refresh_from_db()
    assert job.trace_context is None and Job.objects.filter(name=job.name).count() == 1
    assert "Tracing could not start the span of an enqueue" in caplog.text
