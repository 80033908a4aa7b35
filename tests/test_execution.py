import logging
import os
import threading
import traceback

import pytest
from django.db import transaction
from django.db.models import F

from django_dbjobs import enqueue
from django_dbjobs.db.outage import Outage
from django_dbjobs.models import Isolation, Job, JobStatus
from django_dbjobs.signals import job_failed, job_finished, job_started
from django_dbjobs.worker.running import execution
from django_dbjobs.worker.running.success_batch import SuccessBatch
from tests import jobs


def claim_one(worker="w1"):
    with transaction.atomic():
        (job,) = Job.objects.claim(worker, 1)
    return job


def run_until_settled(worker="w1"):
    """Run the one job until it stops being READY (retries included)."""
    while Job.objects.ready().exists():
        Job.objects.ready().update(run_at=Job.objects.ready().first().enqueued_at)
        job = claim_one(worker)
        execution.run(job, worker)
    return Job.objects.get()


@pytest.mark.django_db
def test_success_stores_return_value_and_status():
    enqueue(jobs.echo, 1, "two", kwargs={"three": [3]})
    job = claim_one()
    assert execution.run(job, "w1") == JobStatus.SUCCESSFUL
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESSFUL
    assert job.return_value == {"args": [1, "two"], "kwargs": {"three": [3]}}
    assert job.finished_at is not None and job.worker_ids == ["w1"] and job.errors == []


@pytest.mark.django_db
def test_failures_retry_with_backoff_then_dead_letter_keeping_every_error():
    enqueue(jobs.always_fails, "kaput")
    job = claim_one()
    assert execution.run(job, "w1") == JobStatus.READY
    job.refresh_from_db()
    assert job.status == JobStatus.READY and job.run_at > job.enqueued_at
    final = run_until_settled("w2")
    assert final.status == JobStatus.FAILED and final.attempts == 3
    assert [e["attempt"] for e in final.errors] == [1, 2, 3]
    assert {e["exception_class_path"] for e in final.errors} == {"builtins.ValueError"}
    assert all("raise ValueError(message)" in e["traceback"] for e in final.errors)
    assert final.worker_ids == ["w1", "w2", "w2"]
    assert final.last_error == "ValueError: kaput"


@pytest.mark.django_db
def test_a_retry_that_succeeds_keeps_the_earlier_error():
    enqueue(jobs.fails_until_attempt, 2)
    final = run_until_settled()
    assert final.status == JobStatus.SUCCESSFUL and final.return_value == 2
    assert [e["summary"] for e in final.errors] == ["ConnectionError: attempt 1 failed"]


@pytest.mark.django_db
def test_unknown_row_is_handed_back_for_a_worker_that_knows_it_without_being_called(tmp_path):
    marker = tmp_path / "pwned"
    Job.objects.create(name="os.system", args=[f"touch {marker}"], max_attempts=5)
    job = claim_one()
    assert execution.run(job, "w1") == JobStatus.READY
    job.refresh_from_db()
    assert (job.status, job.attempts, job.worker_ids, job.worker) == (JobStatus.READY, 0, [], None)
    assert "not a registered job" in job.last_error and job.errors == []
    assert job.run_at > job.enqueued_at, "it waits before being offered again"
    assert not marker.exists(), "the named function was never imported or called"


@pytest.mark.django_db
def test_unknown_row_is_dead_lettered_once_the_grace_has_passed(settings):
    settings.DBJOBS_UNKNOWN_JOB_GRACE = 0
    Job.objects.create(name="os.system", args=["true"], max_attempts=5)
    job = claim_one()
    assert execution.run(job, "w1") == JobStatus.FAILED
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "not a registered job" in job.last_error
    assert job.errors[0]["exception_class_path"] == "django_dbjobs.exceptions.UnknownJob"


@pytest.mark.django_db
def test_system_exit_from_a_job_is_recorded_as_its_failure():
    enqueue(jobs.raises_system_exit)
    final = run_until_settled()
    assert final.status == JobStatus.FAILED and final.attempts == 2
    assert final.errors[0]["exception_class_path"] == "builtins.SystemExit"


@pytest.mark.django_db
def test_error_text_with_nul_and_lone_surrogates_is_still_recorded():
    enqueue(jobs.error_with_odd_bytes)
    job = claim_one()
    assert execution.run(job, "w1") == JobStatus.FAILED
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "\x00" not in job.last_error and job.last_error.startswith("RuntimeError: bad")


@pytest.mark.django_db
def test_a_return_value_that_is_not_json_fails_the_job_clearly():
    enqueue(jobs.returns_unserialisable)
    job = claim_one()
    assert execution.run(job, "w1") == JobStatus.FAILED
    job.refresh_from_db()
    assert "return value" in job.last_error.lower()


@pytest.mark.django_db
def test_outcome_is_dropped_when_the_worker_no_longer_owns_the_job():
    enqueue(jobs.add, 1, 2)
    job = claim_one("old-owner")
    Job.objects.filter(pk=job.pk).update(worker="new-owner")  # as if swept and re-claimed
    assert execution.run(job, "old-owner") is None
    job.refresh_from_db()
    assert (job.status, job.worker, job.return_value) == (JobStatus.RUNNING, "new-owner", None)


@pytest.mark.django_db
def test_release_refunds_the_attempt_and_is_fenced():
    enqueue(jobs.add, 1, 2)
    job = claim_one("me")
    assert job.release("someone-else") is False
    assert job.release("me") is True
    job.refresh_from_db()
    assert (job.status, job.attempts, job.worker) == (JobStatus.READY, 0, None)
    assert job.release("me") is False


@pytest.mark.django_db
def test_signals_report_start_finish_and_dead_letter():
    events = []
    receivers = {
        job_started: lambda sender, job, **kw: events.append(("started", job.attempts)),
        job_finished: lambda sender, job, status, **kw: events.append(("finished", status)),
        job_failed: lambda sender, job, error, **kw: events.append(("failed", error["summary"])),
    }
    for signal, receiver in receivers.items():
        signal.connect(receiver, weak=False)
    try:
        enqueue(jobs.always_fails, max_attempts=2)
        run_until_settled()
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    assert events == [
        ("started", 1),
        ("finished", "READY"),
        ("started", 2),
        ("finished", "FAILED"),
        ("failed", "ValueError: boom"),
    ]


@pytest.mark.django_db(transaction=True)
def test_raising_receivers_are_logged_and_outcomes_stored(caplog):
    def explode(sender, **kwargs):
        raise RuntimeError("receiver bug")

    for signal in (job_started, job_finished, job_failed):
        signal.connect(explode, weak=False)
    try:
        enqueue(jobs.add, 1, 2)
        enqueue(jobs.always_fails, max_attempts=1, priority=-1)
        assert execution.run(claim_one(), "w1") == JobStatus.SUCCESSFUL
        assert execution.run(claim_one(), "w1") == JobStatus.FAILED
    finally:
        for signal in (job_started, job_finished, job_failed):
            signal.disconnect(explode)
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.SUCCESSFUL, JobStatus.FAILED}
    raised = [r for r in caplog.records if "Signal receiver" in r.getMessage()]
    assert len(raised) == 5 and all(r.exc_info and r.exc_info[0] is RuntimeError for r in raised)


@pytest.mark.django_db(transaction=True)
def test_an_exception_whose_message_raises_is_still_recorded():
    enqueue(jobs.raises_unprintable)
    assert execution.run(claim_one(), "w1") == JobStatus.FAILED
    job = Job.objects.get()
    assert job.last_error == "Unprintable: <the exception's message could not be read>"
    assert job.errors[0]["exception_class_path"] == "tests.jobs.Unprintable"


@pytest.mark.django_db(transaction=True)
def test_failed_attempts_are_logged_with_their_traceback(caplog):
    enqueue(jobs.always_fails, "kaput")
    execution.run(claim_one(), "w1")
    (record,) = [r for r in caplog.records if r.getMessage().startswith("Job will retry")]
    assert record.exc_info and record.exc_info[0] is ValueError


@pytest.mark.django_db(transaction=True)
def test_a_dead_lettered_job_is_logged_once_with_the_traceback_of_its_own_code(caplog):
    enqueue(jobs.always_fails, "kaput", max_attempts=1)
    assert execution.run(claim_one(), "w1") == JobStatus.FAILED
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert record.name == "django_dbjobs" and record.getMessage().startswith("Job failed")
    assert [frame.name for frame in traceback.extract_tb(record.exc_info[2])] == ["always_fails"]
    stored = Job.objects.get().errors[0]["traceback"]
    assert stored.endswith("ValueError: kaput\n") and "django_dbjobs" + os.sep not in stored, stored


@pytest.mark.django_db(transaction=True)
def test_a_return_value_that_is_not_json_is_a_type_error_logged_once(caplog):
    enqueue(jobs.returns_unserialisable)
    assert execution.run(claim_one(), "w1") == JobStatus.FAILED
    job = Job.objects.get()
    assert (job.errors[0]["exception_class_path"], job.attempts) == ("builtins.TypeError", 1)
    assert job.last_error == (
        "TypeError: The job ran, but its return value is an object, which is not JSON data. "
        "Return ids, strings, numbers, lists and dicts. Unsupported type: <class 'object'>."
    )
    assert job.errors[0]["traceback"] == job.last_error + "\n", "no frame of the worker's checks"
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert record.getMessage().startswith("Job failed") and record.exc_info[0] is TypeError


@pytest.mark.django_db(transaction=True)
def test_a_job_waiting_to_run_alone_records_its_start_and_stores_its_outcome_at_once():
    enqueue(jobs.own_isolation)
    Job.objects.update(isolation=Isolation.WAITING)
    batched = []
    status = execution.run(claim_one(), "w1", on_success=lambda job, value: batched.append(job))
    assert status == JobStatus.SUCCESSFUL and batched == [], "not left waiting in a batch"
    job = Job.objects.get()
    assert (job.status, job.return_value, job.isolation) == (JobStatus.SUCCESSFUL, "STARTED", "")


@pytest.mark.django_db(transaction=True)
def test_a_return_value_the_database_refuses_dead_letters_the_job_with_a_clear_error():
    enqueue(jobs.add, 1, 2, max_attempts=5)
    job = claim_one()
    assert execution.store_success(job, "w1", jobs.unstorable_value(), Outage("default")) == JobStatus.FAILED
    job = Job.objects.get()
    assert job.status == JobStatus.FAILED and job.return_value is None
    assert job.last_error.startswith(
        "UnstorableResult: the job ran, but the database refused its return value"
    )


@pytest.mark.django_db(transaction=True)
def test_a_batch_with_one_refused_value_is_stored_job_by_job():
    for i in range(5):
        enqueue(jobs.add, i, 1)
    with transaction.atomic():
        claimed = Job.objects.claim("w1", 5)
    batch = SuccessBatch("w1", "default", threading.Event(), Outage("default"))
    for job in claimed:
        batch.add(job, jobs.unstorable_value() if job.args[0] == 2 else job.args[0] + 1)
    batch.flush(force=True)
    rows = {job.args[0]: job for job in Job.objects.all()}
    assert rows.pop(2).status == JobStatus.FAILED
    assert {(j.status, j.return_value) for j in rows.values()} == {
        (JobStatus.SUCCESSFUL, n + 1) for n in rows
    }


def test_return_values_are_cleaned_not_refused():
    from django_dbjobs.enqueuing import validation

    assert validation.return_value(["a\ud800", {"k\x00": "b\x00"}], True) == ["a?", {"k\ufffd": "b\ufffd"}]


@pytest.mark.django_db(transaction=True)
def test_a_return_value_larger_than_the_payload_limit_is_dead_lettered(settings):
    enqueue(jobs.echo, "x" * 600)
    settings.DBJOBS_MAX_PAYLOAD_BYTES = 500
    assert execution.run(claim_one(), "w1", on_success=lambda job, value: None) == JobStatus.FAILED
    job = Job.objects.get()
    assert (
        job.last_error.startswith("UnstorableResult") and "DBJOBS_MAX_PAYLOAD_BYTES (500)" in job.last_error
    )


@pytest.mark.django_db
def test_an_exception_whose_with_traceback_raises_is_recorded_all_the_same():
    enqueue(jobs.raises_hostile_exception)
    job = claim_one()
    assert execution.run(job, "w1") == JobStatus.FAILED
    job.refresh_from_db()
    assert job.errors[0]["exception_class_path"] == "tests.jobs.HostileError"


def lose_the_answer_to(monkeypatch, status, meanwhile=None):
    """The first UPDATE of a job to `status` commits, then its answer is lost.

    As a server gone between its commit and its reply: the outage policy tries the
    write again, and that try finds the row no longer RUNNING under this worker. With
    `meanwhile`, the UPDATE never got there: `meanwhile()` moves the row instead.
    """
    from django.db import OperationalError

    from django_dbjobs.models.queryset import JobQuerySet

    real, lost = JobQuerySet.update, []

    def update(self, **changes):
        if lost or changes.get("status") != status:
            return real(self, **changes)
        lost.append(status)
        if meanwhile is None:
            real(self, **changes)
        else:
            meanwhile()
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(JobQuerySet, "update", update)
    return lost


def signals_sent():
    events = []
    receivers = {
        job_finished: lambda sender, job, status, **kw: events.append(("finished", status)),
        job_failed: lambda sender, job, error, **kw: events.append(("failed", error["summary"])),
    }
    for signal, receiver in receivers.items():
        signal.connect(receiver, weak=False)
    return events, receivers


REPLAYS = {  # job, max_attempts, cancelled before it started: the status stored, the signals
    "success": (jobs.add, 3, False, JobStatus.SUCCESSFUL, [("finished", "SUCCESSFUL")]),
    "retry": (jobs.always_fails, 3, False, JobStatus.READY, [("finished", "READY")]),
    "dead-letter": (
        jobs.always_fails,
        1,
        False,
        JobStatus.FAILED,
        [("finished", "FAILED"), ("failed", "ValueError: boom")],
    ),
    "cancel": (
        jobs.add,
        3,
        True,
        JobStatus.FAILED,
        [("finished", "FAILED"), ("failed", "JobCancelled: the job was cancelled before it started")],
    ),
}


@pytest.mark.parametrize("case", REPLAYS, ids=list(REPLAYS))
@pytest.mark.django_db(transaction=True)  # the outage policy closes the connection
def test_an_outcome_stored_again_after_its_answer_was_lost_is_signalled_once(case, monkeypatch, caplog):
    function, max_attempts, cancelled, status, expected = REPLAYS[case]
    enqueue(function, *([2, 3] if function is jobs.add else []), max_attempts=max_attempts)
    job = claim_one("w1")
    if cancelled:
        Job.objects.filter(pk=job.pk).request_cancel()
        job.refresh_from_db()
    lost = lose_the_answer_to(monkeypatch, status)
    outage = Outage("default")
    outage.pause = 0.01
    events, receivers = signals_sent()
    try:
        assert execution.run(job, "w1", outage=outage) == status
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    assert lost == [status], "the first try committed and raised"
    assert events == expected
    assert not [r for r in caplog.records if "outcome dropped" in r.getMessage()]
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, len(stored.errors)) == (status, 0 if case == "success" else 1)


@pytest.mark.parametrize("case", ["success", "retry", "dead-letter"])
@pytest.mark.django_db(transaction=True)
def test_an_outcome_lost_with_the_lease_during_an_outage_is_dropped_unsignalled(case, monkeypatch, caplog):
    function, max_attempts, _cancelled, status, _expected = REPLAYS[case]
    enqueue(function, *([2, 3] if function is jobs.add else []), max_attempts=max_attempts)
    job = claim_one("w1")
    # Before the write got there, a sweep gave the job back and another worker ran it.
    swept = Job.objects.filter(pk=job.pk)
    lose_the_answer_to(
        monkeypatch,
        status,
        meanwhile=lambda: swept.update(status=JobStatus.SUCCESSFUL, worker="w2", pickups=F("pickups") + 1),
    )
    outage = Outage("default")
    outage.pause = 0.01
    events, receivers = signals_sent()
    try:
        assert execution.run(job, "w1", outage=outage) is None
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    assert events == []
    assert [r for r in caplog.records if "outcome dropped" in r.getMessage()]
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker, stored.errors) == (JobStatus.SUCCESSFUL, "w2", [])


@pytest.mark.django_db(transaction=True)  # the outage policy closes the connection
def test_a_retry_stored_as_a_cancel_whose_answer_was_lost_is_signalled_as_the_cancel(monkeypatch, caplog):
    """A job asked to stop fails by itself with attempts left: its retry is stored as a cancel
    (models/cancelling.py). The answer to that commit is lost; the write tried again finds
    the attempt stored, followed by the cancel: the worker reports FAILED and job_failed,
    not a retry."""
    from django.db import OperationalError

    from django_dbjobs.models import cancelling

    enqueue(jobs.always_fails, max_attempts=3)
    job = claim_one("w1")
    Job.objects.filter(pk=job.pk).request_cancel()  # its copy has not seen it: it runs, and fails
    real, lost = cancelling.record_cancelled, []

    def record_then_lose_the_answer(*args, **kwargs):
        stored = real(*args, **kwargs)
        if stored and not lost:
            lost.append(True)
            raise OperationalError("server closed the connection unexpectedly")
        return stored

    monkeypatch.setattr(cancelling, "record_cancelled", record_then_lose_the_answer)
    outage = Outage("default")
    outage.pause = 0.01
    events, receivers = signals_sent()
    try:
        status = execution.run(job, "w1", outage=outage)
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    assert lost == [True], "the cancel committed and its answer was lost"
    stored = Job.objects.get(pk=job.pk)
    assert stored.status == status == JobStatus.FAILED
    assert [error["summary"] for error in stored.errors] == ["ValueError: boom", cancelling.RETRY]
    assert events == [("finished", "FAILED"), ("failed", cancelling.RETRY)]
