"""Traces of every way in: enqueue_many(), bulk_enqueue(), django.tasks, schedules, batch callbacks."""

import datetime

import pytest
from opentelemetry.trace import SpanKind

from django_dbjobs import aenqueue, batch, bulk_enqueue, enqueue, enqueue_many, prepare
from django_dbjobs.models import Job
from django_dbjobs.schedules.firing import fire, run_now
from django_dbjobs.testing import run_jobs
from tests import jobs, tasks
from tests.test_schedules import make

pytestmark = pytest.mark.django_db


def of_kind(spans, kind: SpanKind) -> list:
    return [span for span in spans.get_finished_spans() if span.kind == kind]


def traceparent_span(job: Job) -> int:
    return int(Job.objects.get(pk=job.pk).trace_context["traceparent"].split("-")[2], 16)


def test_enqueue_many_is_one_span_whose_jobs_all_continue_it(spans):
    stored = enqueue_many(jobs.noop, [(1,), (2,), (3,)], queue="bulk")
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    assert send.name == "send bulk"
    assert send.attributes["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in send.attributes
    assert {traceparent_span(job) for job in stored} == {send.context.span_id}
    run_jobs(["bulk"])
    runs = of_kind(spans, SpanKind.CONSUMER)
    assert sorted(s.attributes["messaging.message.id"] for s in runs) == sorted(job.pk for job in stored)
    assert {s.parent.span_id for s in runs} == {send.context.span_id}


def test_enqueue_many_of_a_keyed_job_is_one_span_too(spans):
    stored = enqueue_many(jobs.keyed_span, [("a", 1), ("b", 2)])  # a key made per item
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    assert send.attributes["messaging.batch.message_count"] == 2
    assert {traceparent_span(job) for job in stored} == {send.context.span_id}


def test_bulk_enqueue_of_prepared_jobs_is_one_span(spans):
    prepared = [prepare(jobs.noop, 1, queue="a"), prepare(jobs.noop, 2, queue="b")]
    stored = bulk_enqueue(prepared)
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    assert send.name == "send"  # two queues: no one destination
    assert "messaging.destination.name" not in send.attributes
    assert send.attributes["messaging.batch.message_count"] == 2
    assert {traceparent_span(job) for job in stored} == {send.context.span_id}


@pytest.mark.skipif(tasks.task is None, reason="needs django.tasks or the django-tasks backport")
def test_a_django_task_is_sent_and_run_in_one_trace(spans):
    result = tasks.send_welcome.enqueue(7)
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    assert send.name == "send emails" and send.attributes["messaging.message.id"] == result.id
    run_jobs(["emails"])
    (process,) = of_kind(spans, SpanKind.CONSUMER)
    assert process.parent.span_id == send.context.span_id


@pytest.mark.django_db(transaction=True)
def test_a_schedule_firing_sends_its_job_in_a_trace_its_run_continues(spans):
    schedule = make(cron="* * * * *", job="tests.jobs.noop", args=[1])
    fired = fire(schedule, schedule.next_due_at + datetime.timedelta(seconds=1), "tests:1", "default")
    (job,) = fired.jobs
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    assert send.parent is None and send.attributes["messaging.message.id"] == job.pk
    assert traceparent_span(job) == send.context.span_id
    run_jobs()
    (process,) = of_kind(spans, SpanKind.CONSUMER)
    assert process.parent.span_id == send.context.span_id


@pytest.mark.django_db(transaction=True)
def test_a_schedule_run_now_is_traced(spans):
    job, created = run_now(make(job="tests.jobs.noop", args=[1]))
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    assert created and traceparent_span(job) == send.context.span_id


def test_a_batch_callback_links_to_its_enqueue_and_its_members_sends(spans):
    with batch(on_complete=jobs.noop) as opened:
        first = enqueue(jobs.noop, 1)
        rest = enqueue_many(jobs.noop, [(2,), (3,)])
    sends = {s.attributes.get("messaging.message.id"): s for s in of_kind(spans, SpanKind.PRODUCER)}
    callback_send = sends[opened.on_complete]
    run_jobs()
    runs = {s.attributes["messaging.message.id"]: s for s in of_kind(spans, SpanKind.CONSUMER)}
    member_sends = {sends[first.pk].context.span_id, sends[None].context.span_id}
    assert {runs[job.pk].parent.span_id for job in [first, *rest]} == member_sends
    callback = runs[opened.on_complete]
    assert callback.parent is None
    assert callback.context.trace_id != callback_send.context.trace_id
    links = {link.context.span_id: link.attributes["django_dbjobs.link"] for link in callback.links}
    assert links == {
        callback_send.context.span_id: "enqueue",
        **{span_id: "batch" for span_id in member_sends},
    }


@pytest.mark.django_db(transaction=True)
def test_aenqueue_sends_its_job_in_the_callers_trace(spans):
    from asgiref.sync import async_to_sync
    from opentelemetry import trace

    async def view():
        with trace.get_tracer("tests").start_as_current_span("async view") as current:
            return await aenqueue(jobs.noop, 1), current

    job, view_span = async_to_sync(view)()
    (send,) = of_kind(spans, SpanKind.PRODUCER)
    assert send.parent.span_id == view_span.get_span_context().span_id
    assert traceparent_span(job) == send.context.span_id
