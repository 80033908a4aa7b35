"""Paused queues: every worker's claim skips them within a second or two; the jobs wait.
On PostgreSQL an idle worker hears a pause or a resume at once (a NOTIFY)."""

import signal
import time

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from django_dbjobs import db, enqueue
from django_dbjobs.exceptions import InvalidJob
from django_dbjobs.models import Job, JobStatus, Queue
from django_dbjobs.worker.claiming.paused_queues import (
    HEARD_TRUST_LONGEST,
    PAUSE_CHECK_INTERVAL,
    PausedQueues,
)

from . import jobs
from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_pause_and_resume_are_fenced_and_report_what_changed():
    assert Queue.objects.pause(["emails", "default"], by="ops") == 2
    assert Queue.objects.pause(["emails"], by="someone else") == 0
    assert Queue.objects.get(pk="emails").paused_by == "ops"
    assert Queue.objects.resume(["emails"]) == 1
    assert Queue.objects.resume(["emails"]) == 0
    assert list(Queue.objects.paused().values_list("name", flat=True)) == ["default"]


def test_pausing_a_malformed_queue_name_is_refused():
    with pytest.raises(InvalidJob):
        Queue.objects.pause(["no spaces please"])
    assert not Queue.objects.exists()


@pytest.mark.parametrize("queues", [None, ["emails", "default"]])
def test_a_claim_skips_paused_queues(queues):
    emails = Job.objects.create(name="tests.jobs.add", args=[1, 2], queue="emails", priority=9)
    default = Job.objects.create(name="tests.jobs.add", args=[1, 2], queue="default")
    claimed = Job.objects.claim("w1", limit=5, queues=queues, paused=frozenset({"emails"}))
    assert [job.pk for job in claimed] == [default.pk]
    assert Job.objects.get(pk=emails.pk).status == JobStatus.READY


def test_a_claim_on_paused_queues_only_takes_nothing():
    Job.objects.create(name="tests.jobs.add", args=[1, 2], queue="emails")
    assert Job.objects.claim("w1", limit=5, queues=["emails"], paused=frozenset({"emails"})) == []
    assert Job.objects.ready().count() == 1


def test_the_worker_view_of_paused_queues_is_read_again_after_a_second(caplog, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("django_dbjobs.worker.claiming.paused_queues.time.monotonic", lambda: clock[0])
    paused = PausedQueues("w1", "default")
    assert paused.current() == frozenset()
    Queue.objects.pause(["emails"])
    clock[0] += PAUSE_CHECK_INTERVAL - 0.01
    assert paused.current() == frozenset(), "trusted for a second"
    clock[0] += 0.01
    with caplog.at_level("INFO", logger="django_dbjobs"):
        assert paused.current() == frozenset({"emails"})
    assert "Queue paused, not claiming from it queue=emails" in caplog.text


def test_a_list_read_in_a_listen_session_is_trusted_while_it_lasts_and_hears_no_change(monkeypatch):
    """PostgreSQL's idle wake-up claim (claim_free_slots(woken=True)) asks current(notified=True): the list
    read in the LISTEN session still open, with no notification of a change since."""
    clock, session = [1000.0], [1]
    monkeypatch.setattr("django_dbjobs.worker.claiming.paused_queues.time.monotonic", lambda: clock[0])
    paused = PausedQueues("w1", "default")
    paused.listen_session = lambda: session[0]
    assert not paused.trusted(), "never read"
    assert paused.current(notified=True) == frozenset()
    Queue.objects.pause(["emails"])  # not heard here: nobody calls changed()
    clock[0] += HEARD_TRUST_LONGEST - 0.01
    assert paused.trusted()
    with CaptureQueriesContext(connection) as queries:
        assert paused.current(notified=True) == frozenset()
    assert queries.captured_queries == []
    clock[0] += 0.01
    assert not paused.trusted(), "a minute at most: a write with triggers off notifies nobody"
    assert paused.current() == frozenset({"emails"}), "the loop's claims read them every second still"
    paused.changed()  # a notification: a queue was paused or resumed
    assert not paused.trusted() and paused.unread
    assert paused.current(notified=True) == frozenset({"emails"}), "read again"
    assert not paused.unread
    clock[0] += 30
    assert paused.trusted()
    session[0] = 2  # another LISTEN session: what was sent before it began went unheard
    assert not paused.trusted()
    assert paused.current(notified=True) == frozenset({"emails"})
    assert paused.trusted()
    session[0] = None  # the LISTEN connection is lost (or hears no queue: the trigger is off)
    clock[0] += 30
    assert not paused.trusted()


@pytest.mark.slow
@pytest.mark.skipif(not db.supports_listen(), reason="NOTIFY exists on PostgreSQL only")
def test_an_idle_worker_hears_a_pause_and_a_resume_at_once(run_jobs, record_file):
    """Its wake-up claim trusts the paused queues it read while no pause is heard: a queue
    paused in the very commit that enqueues its job keeps the job waiting; a resume wakes it."""
    worker = run_jobs("--poll-interval", "60")
    enqueue(jobs.record, "warm-up")
    assert wait_for(lambda: "warm-up" in record_file.read_text(), 20)
    time.sleep(2 * PAUSE_CHECK_INTERVAL)  # idle: its list is more than a second old
    with transaction.atomic():
        waiting = enqueue(jobs.record, "paused-job", queue="emails")
        Queue.objects.pause(["emails"])
    time.sleep(1.0)
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.READY
    resumed = time.monotonic()
    Queue.objects.resume(["emails"])
    assert wait_for(lambda: "paused-job" in record_file.read_text(), 20)
    assert time.monotonic() - resumed < 5, "woken by the resume, not by its poll a minute later"
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


@pytest.mark.slow
def test_a_running_worker_stops_claiming_from_a_paused_queue_and_resumes(run_jobs, record_file):
    worker = run_jobs("--concurrency", "2")
    enqueue(jobs.record, "warm-up")
    assert wait_for(lambda: "warm-up" in record_file.read_text(), 20)
    Queue.objects.pause(["emails"], by="test")
    time.sleep(2 * PAUSE_CHECK_INTERVAL)  # "within a second or two"
    waiting = enqueue(jobs.record, "paused-job", queue="emails")
    enqueue(jobs.record, "other-queue")
    assert wait_for(lambda: "other-queue" in record_file.read_text(), 20)
    time.sleep(1.5)
    assert "paused-job" not in record_file.read_text()
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.READY
    Queue.objects.resume(["emails"])
    assert wait_for(lambda: "paused-job" in record_file.read_text(), 20)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    output = worker.output()
    assert "Queue paused, not claiming from it queue=emails" in output
    assert "Queue resumed queue=emails" in output


@pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite's idle check reads PRAGMA data_version, not the jobs"
)
def test_the_idle_probe_does_not_take_a_paused_backlog_for_work():
    import threading

    from django_dbjobs.worker.lifecycle.idle_wait import IdleWaiter

    Job.objects.create(name="tests.jobs.add", args=[1, 2], queue="emails")
    paused = frozenset({"emails"})
    event = threading.Event()
    assert IdleWaiter("default", event, None)._changed()
    assert not IdleWaiter("default", event, None, lambda: paused)._changed()
    assert not IdleWaiter("default", event, ["emails"], lambda: paused)._changed()
    started = time.monotonic()
    assert not IdleWaiter("default", event, None, lambda: paused).wait(0.3)
    assert time.monotonic() - started >= 0.29, "waited out the poll instead of probing"
    Job.objects.create(name="tests.jobs.add", args=[1, 2], queue="default")
    assert IdleWaiter("default", event, ["emails", "default"], lambda: paused)._changed()
    assert IdleWaiter("default", event, ["default"])._changed()


def test_empty_claims_are_spaced_while_queues_are_paused():
    from django_dbjobs.worker import Worker
    from django_dbjobs.worker.claiming.claimer import PAUSED_CLAIM_GAP

    Queue.objects.pause(["emails"])
    Job.objects.create(name="tests.jobs.add", args=[1, 2], queue="emails")
    worker = Worker(concurrency=1)
    claimer = worker.claimer
    assert claimer.claim_free_slots() == 0  # reads the pause, walks past the paused job
    assert claimer.paused.names == frozenset({"emails"})
    job = Job.objects.create(name="tests.jobs.add", args=[1, 2], queue="default")
    assert claimer.claim_free_slots() == 0, "within the gap: no claim"
    other = Worker(queues=["default"], concurrency=1).claimer  # serves no paused queue: no gap
    assert other.claim_free_slots() == 1 and other.paused.served == frozenset()
    Job.objects.filter(pk=job.pk).update(status=JobStatus.READY, worker=None)
    time.sleep(PAUSED_CLAIM_GAP)
    assert claimer.claim_free_slots() == 1
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    Job.objects.filter(pk=job.pk).update(status=JobStatus.READY, worker=None)


def test_a_queue_resumed_just_now_is_claimed_from_within_the_gap():
    """A change heard (PostgreSQL's NOTIFY calls changed()) lets the next claim read the
    paused queues at once, gap or not: the notification does not come again."""
    from django_dbjobs.worker import Worker

    Queue.objects.pause(["emails"])
    job = Job.objects.create(name="tests.jobs.add", args=[1, 2], queue="emails")
    claimer = Worker(concurrency=1).claimer
    assert claimer.claim_free_slots() == 0  # reads the pause, walks past the paused job
    Queue.objects.resume(["emails"])
    assert claimer.claim_free_slots() == 0, "within the gap, the pause as read: no claim"
    claimer.paused.changed()
    assert claimer.claim_free_slots() == 1
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
