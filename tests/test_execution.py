import pytest
from django.db import transaction

from django_dbjobs import enqueue, execution
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.signals import job_failed, job_finished, job_started
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
