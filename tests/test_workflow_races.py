"""Workflows where writes cross: replayed flushes, retried dead letters, cancels and enqueues
racing outcomes. Real second connections (threads) where a lock order is the question."""

import threading
import time

import pytest
from django.db import connections

from django_dbjobs import after, batch, bulk_enqueue, enqueue, enqueue_many, prepare
from django_dbjobs.enqueuing import workflow_options
from django_dbjobs.models import Batch, Blocked, FailedJob, Job, JobDependency, JobStatus
from django_dbjobs.testing import run_jobs
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_flush_stored_again_counts_nothing_twice():
    """A success flush whose commit's answer was lost is stored again by the outage retry."""
    with batch(on_complete=jobs.batch_completed) as opened:
        enqueue(jobs.record, "a")
        enqueue(jobs.record, "b")
    first = Job.objects.filter(batch=opened).order_by("pk").first()
    waiting = enqueue(jobs.record, "c", after=[first])
    claimed = Job.objects.filter(pk=first.pk).claim("w1", 1)
    assert len(Job.objects.finish_successes("w1", [(job, None) for job in claimed])) == 1
    # Reported finished (its success signal is sent), but counted once.
    assert len(Job.objects.finish_successes("w1", [(job, None) for job in claimed])) == 1
    opened.refresh_from_db()
    assert (opened.total, opened.succeeded, opened.finished_at) == (2, 1, None)
    waiting.refresh_from_db()
    assert waiting.blocked == Blocked.NONE and waiting.waiting_for is None


def test_a_retried_dead_letter_does_not_release_a_job_waiting_on_others(record_file):
    failing = enqueue(jobs.always_fails, max_attempts=1)
    later = enqueue(jobs.record, "later", delay=3600)
    waiting = enqueue(jobs.record, "w", after=[failing, later], after_failure="run")
    run_jobs()
    waiting.refresh_from_db()
    assert waiting.waiting_for == 1
    FailedJob.objects.get(pk=failing.pk).retry()
    Job.objects.filter(pk=failing.pk).update(name=jobs.record.name, args=["again"])
    run_jobs()
    waiting.refresh_from_db()
    assert (waiting.blocked, waiting.waiting_for) == (Blocked.AFTER, 1), "still waiting for `later`"
    assert JobDependency.objects.filter(job=waiting, counted=True).count() == 1
    run_jobs(include_scheduled=True)
    assert record_file.read_text().split() == ["again", "later", "w"]


def test_a_job_cancelled_at_once_in_the_block_does_not_finish_the_batch(record_file):
    failed = enqueue(jobs.always_fails, max_attempts=1)
    run_jobs()
    with batch(description="held", on_complete=jobs.batch_completed) as opened:
        enqueue(jobs.record, "x", after=[failed])  # cancelled at once: DependencyFailed
        first = enqueue(jobs.record, "y")
        Job.objects.filter(pk=first.pk).cancel()  # cancelled too, inside the block
        enqueue(jobs.record, "z")
    opened.refresh_from_db()
    assert (opened.total, opened.failed, opened.finished_at) == (3, 2, None)
    run_jobs()
    assert record_file.read_text().split() == ["z", "complete:held:3:1:2"]


def test_an_after_block_and_the_after_option_hold_enqueue_many_and_bulk_enqueue(record_file):
    first = enqueue(jobs.record, "first", priority=-10)
    with after(first):
        many = enqueue_many(jobs.record, [("m1",), ("m2",)])
        bulk = bulk_enqueue([prepare(jobs.record, "b1")])
    explicit = enqueue_many(jobs.record, [("e1",)], after=[first])
    for job in [*many, *bulk, *explicit]:
        job.refresh_from_db()
        assert (job.blocked, job.waiting_for) == (Blocked.AFTER, 1)
    run_jobs()
    recorded = record_file.read_text().split()
    assert recorded[0] == "first" and sorted(recorded[1:]) == ["b1", "e1", "m1", "m2"]


def test_a_dropped_callback_that_others_wait_for_cancels_them(record_file):
    with batch(on_success=jobs.batch_succeeded, on_failure=jobs.batch_failed) as opened:
        enqueue(jobs.always_fails, max_attempts=1)
    after_success = enqueue(jobs.record, "next", after=[opened.on_success])
    enqueue(jobs.record, "cleanup", after=[opened.on_failure])
    run_jobs()
    after_success.refresh_from_db()
    assert after_success.status == JobStatus.FAILED and opened.on_success in after_success.last_error
    assert record_file.read_text().split() == ["failure::1:0:1", "cleanup"]


def test_cancelling_a_job_that_gains_a_dependent_meanwhile_cancels_it_instead_of_deleting_it(monkeypatch):
    target = enqueue(jobs.record, "a")
    real = Job.objects.none()._batches.__func__

    def batches_then_a_new_dependent(self, size):
        for pks in real(self, size):
            enqueue(jobs.record, "b", after=[target])  # commits between the read and the DELETE
            yield pks

    monkeypatch.setattr(type(Job.objects.none()), "_batches", batches_then_a_new_dependent)
    assert Job.objects.filter(pk=target.pk).cancel() == 1
    target.refresh_from_db()
    assert target.status == JobStatus.FAILED, "recorded cancelled, so the waiting job learns of it"
    waiting = Job.objects.get(args=["b"])
    assert waiting.status == JobStatus.FAILED and "DependencyFailed" in waiting.last_error


def test_an_enqueue_that_joins_and_waits_while_the_job_it_waits_for_finishes_does_not_deadlock(monkeypatch):
    """The stages pattern: a job adds to its own batch a job that waits for a sibling, as the
    sibling finishes. Both sides lock the sibling's row first, then the batch's."""
    with batch(on_complete=jobs.batch_completed) as opened:
        sibling = enqueue(jobs.record, "sibling")
        enqueue(jobs.record, "other")
    (claimed,) = Job.objects.filter(pk=sibling.pk).claim("w1", 1)
    holding = threading.Event()
    real = workflow_options.wait_for

    def wait_for_then_dawdle(using, upstream):
        found = real(using, upstream)  # the sibling's row is locked by this transaction now
        holding.set()
        time.sleep(1.0)
        return found

    monkeypatch.setattr(workflow_options, "wait_for", wait_for_then_dawdle)
    errors = []

    def enqueuer():
        try:
            enqueue(jobs.record, "next", batch=opened, after=[sibling])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=enqueuer)
    thread.start()
    assert holding.wait(10)
    assert claimed.mark_succeeded("w1", None)
    thread.join(30)
    assert errors == []
    added = Job.objects.get(args=["next"])
    assert (added.blocked, added.waiting_for, added.batch_id) == (Blocked.NONE, None, opened.pk)
    opened.refresh_from_db()
    assert (opened.total, opened.succeeded) == (3, 1)
    assert Batch.objects.filter(finished_at__isnull=True).count() == 1
