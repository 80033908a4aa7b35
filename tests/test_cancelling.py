"""A job asked to stop that a write would make READY again is recorded cancelled in that
write (models/cancelling.py): it never takes a rate slot, a concurrency slot, or a wait at
the gate of a job that must run alone, only to be recorded cancelled."""

import datetime
import signal

import pytest

from django_dbjobs import batch, enqueue
from django_dbjobs.flow import admission
from django_dbjobs.flow.rates import Rate, RateLimitedClaims, slots_in_use
from django_dbjobs.models import Batch, Blocked, Isolation, Job, JobStatus, RateSlot
from django_dbjobs.observability.fingerprints import fingerprint
from django_dbjobs.signals import job_failed
from django_dbjobs.worker.leases.sweep import sweep
from tests import jobs
from tests.conftest import wait_for

CANCELLED = "django_dbjobs.exceptions.JobCancelled"

pytestmark = pytest.mark.django_db(transaction=True)


def asked_to_stop(worker="w1", **claim):
    """Claim the one due job for `worker` and ask it to stop, as cancel() does while it runs."""
    (job,) = Job.objects.claim(worker, **claim)
    assert Job.objects.filter(pk=job.pk).request_cancel() == 1
    return job


def assert_cancelled(pk, attempts, worker_ids):
    job = Job.objects.get(pk=pk)
    assert job.status == JobStatus.FAILED and job.errors[-1]["exception_class_path"] == CANCELLED
    assert (job.attempts, job.worker_ids, job.isolation) == (attempts, worker_ids, Isolation.NONE)
    assert job.finished_at is not None and job.last_error == job.errors[-1]["summary"]
    assert job.error_fingerprint == fingerprint(job.errors[-1]), (
        "the cause of a dead letter is stored with it"
    )
    return job


def test_a_job_asked_to_stop_and_released_is_recorded_cancelled_not_ready():
    enqueue(jobs.add, 1, 2)
    job = asked_to_stop()
    assert Job.objects.release_all("w1", [job]) == 1
    assert job.status == JobStatus.FAILED  # the caller's copy says so too
    done = assert_cancelled(job.pk, attempts=0, worker_ids=[])  # released: its pickup is undone
    assert "gave it back unfinished" in done.last_error
    assert Job.objects.claim("w2") == []


def test_the_same_release_gives_back_the_jobs_not_asked_to_stop():
    enqueue(jobs.add, 1, 2)
    enqueue(jobs.add, 3, 4)
    claimed = Job.objects.claim("w1", limit=2)
    Job.objects.filter(pk=claimed[0].pk).request_cancel()
    assert Job.objects.release_all("w1", claimed) == 2
    assert_cancelled(claimed[0].pk, attempts=0, worker_ids=[])
    other = Job.objects.get(pk=claimed[1].pk)
    assert (other.status, other.attempts, other.cancel_requested_at) == (JobStatus.READY, 0, None)


@pytest.fixture
def rated(settings):
    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "1/m"}}


@pytest.mark.usefixtures("rated")
def test_a_job_asked_to_stop_and_released_uses_no_rate_slot():
    enqueue(jobs.rated_start, 1)
    claims = RateLimitedClaims("w1", "default")
    rate = Rate(1, 60)
    (job,) = claims.claim("rated", rate, 1, include_waiting=True)
    Job.objects.filter(pk=job.pk).request_cancel()
    Job.objects.release_all("w1", [job])
    RateSlot.objects.update(
        used_at=datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
    )  # the period of the first start is over
    claims._next_try.clear()
    assert claims.claim("rated", rate, 1, include_waiting=True) == []
    assert slots_in_use("rated", rate, "default") == 0, "nothing to record cancelled takes the rate's slot"
    assert_cancelled(job.pk, attempts=0, worker_ids=[])


def test_a_keyed_job_asked_to_stop_and_released_leaves_its_slot_to_the_next_job_of_its_key():
    first = enqueue(jobs.keyed_python_span, "a", 1, 0)  # limit 1
    second = enqueue(jobs.keyed_python_span, "a", 2, 0)
    assert admission.admit("default") == 1
    job = asked_to_stop()
    assert job.pk == first.pk
    Job.objects.release_all("w1", [job])
    assert Job.objects.get(pk=first.pk).blocked == Blocked.DONE  # finished: holds no slot, waits for none
    assert admission.admit("default") == 1
    assert Job.objects.get(pk=second.pk).blocked == Blocked.NONE, "the slot went to the next job of the key"
    assert_cancelled(first.pk, attempts=0, worker_ids=[])


def test_a_job_asked_to_stop_whose_worker_died_is_recorded_cancelled_and_never_waits_to_run_alone():
    enqueue(jobs.add, 1, 2)
    job = asked_to_stop("dead")
    failed = []
    job_failed.connect(
        receiver := lambda sender, job, error, **kw: failed.append(error["summary"]), weak=False
    )
    try:
        result = sweep("sweeper", timeout=30)
    finally:
        job_failed.disconnect(receiver)
    assert (result.given_back, result.requeued, result.failed) == (0, 0, 1)
    done = assert_cancelled(job.pk, attempts=0, worker_ids=[])  # uncharged: it may never have started
    assert "dead stopped heartbeating" in done.last_error and failed == [done.last_error]
    assert Job.objects.claim("w2") == [], "no worker holds it at the gate of jobs that must run alone"


def test_a_job_asked_to_stop_while_it_ran_alone_is_recorded_cancelled_when_its_worker_dies():
    enqueue(jobs.add, 1, 2)
    Job.objects.claim("dead")
    sweep("sweeper", timeout=30)  # given back to run alone
    job = asked_to_stop("dead-again")
    assert job.isolation == Isolation.WAITING and job.mark_started_alone("dead-again")
    assert sweep("sweeper", timeout=30).failed == 1
    assert_cancelled(job.pk, attempts=1, worker_ids=["dead-again"])  # charged: it was running


def test_a_failed_attempt_of_a_job_asked_to_stop_is_not_retried():
    enqueue(jobs.always_fails)
    job = asked_to_stop()
    assert job.mark_for_retry("w1", {"summary": "ValueError: x", "attempt": 1}, delay=0)
    assert job.status == JobStatus.FAILED
    done = assert_cancelled(job.pk, attempts=1, worker_ids=["w1"])  # charged its own run
    assert [error["summary"] for error in done.errors][0] == "ValueError: x"


def test_a_job_asked_to_stop_that_its_worker_does_not_know_is_recorded_cancelled():
    enqueue(jobs.add, 1, 2)
    job = asked_to_stop()
    error = {"summary": "Handed back: unknown", "attempt": 1}
    assert job.mark_unknown("w1", error, delay=60, grace=3600) == JobStatus.FAILED
    assert_cancelled(job.pk, attempts=0, worker_ids=[])


def test_a_batch_counts_its_job_asked_to_stop_and_released_in_the_same_transaction():
    with batch(description="b", on_failure=jobs.batch_failed) as opened:
        enqueue(jobs.add, 1, 2)
    job = asked_to_stop()
    Job.objects.release_all("w1", [job])
    opened = Batch.objects.get(pk=opened.pk)
    assert (opened.failed, opened.is_finished) == (1, True)
    callback = Job.objects.get(pk=opened.on_failure)
    assert (callback.status, callback.blocked, callback.args) == (
        JobStatus.READY,
        Blocked.NONE,
        [opened.summary()],
    )


def test_a_job_asked_to_stop_and_released_at_shutdown_is_recorded_cancelled(run_jobs, record_file):
    job = enqueue(jobs.keeps_on_when_asked, 60, "on")
    worker = run_jobs("--shutdown-grace", "1")
    assert wait_for(lambda: "started:on" in record_file.read_text().split(), timeout=20)
    assert Job.objects.filter(pk=job.pk).cancel() == 1
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0, worker.output()
    done = assert_cancelled(job.pk, attempts=0, worker_ids=[])
    assert "gave it back unfinished" in done.last_error
    assert f"Job cancelled id={job.pk}" in worker.output()


def test_a_worker_records_cancelled_a_job_asked_to_stop_that_fails_by_itself_and_signals_it_once():
    from django_dbjobs.worker.running import execution

    enqueue(jobs.always_fails)
    job = asked_to_stop()  # its copy has not seen the request: it runs, and fails by itself
    failed = []
    job_failed.connect(
        receiver := lambda sender, job, error, **kw: failed.append(error["summary"]), weak=False
    )
    try:
        assert execution.run(job, "w1") == JobStatus.FAILED
    finally:
        job_failed.disconnect(receiver)
    done = assert_cancelled(job.pk, attempts=1, worker_ids=["w1"])
    assert failed == [done.last_error] and done.errors[0]["summary"] == "ValueError: boom"
