"""The long-job half of Job: progress reports in memory, checkpoints written at once, resume."""

import datetime

import pytest
from django.test import override_settings

from django_dbjobs import enqueue
from django_dbjobs.exceptions import InvalidJobArguments, PayloadTooLarge
from django_dbjobs.models import JobStatus
from django_dbjobs.models.progress import MAX_NOTE, Progress, report
from django_dbjobs.testing import run_jobs
from tests import long_jobs

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_retried_job_resumes_from_the_checkpoint_its_last_attempt_stored():
    job = enqueue(long_jobs.checkpoint_then_fail, 3)
    run_jobs(include_scheduled=True)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESSFUL
    # Attempt 3 read what attempt 2 stored, which had read attempt 1's.
    assert job.return_value == {"attempt": 2, "seen": {"attempt": 1, "seen": None}}
    assert job.resume == {"attempt": 3, "seen": job.return_value}
    # The checkpoint's write carried the newest progress report along.
    assert (job.progress.done, job.progress.total, job.progress.note) == (3, 3, "attempt 3")
    assert job.progress.fraction == 1.0


@pytest.mark.parametrize("kind", list(long_jobs.NOT_JSON))
def test_a_checkpoint_that_is_not_json_data_fails_the_job_and_stores_nothing(kind):
    job = enqueue(long_jobs.checkpoint_not_json, kind)
    with pytest.raises(InvalidJobArguments, match="the checkpoint"):
        run_jobs(raise_errors=True)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.checkpoint_state is None


@override_settings(DBJOBS_MAX_CHECKPOINT_BYTES=100)
def test_a_checkpoint_larger_than_the_setting_is_refused_with_the_limit_named():
    job = enqueue(long_jobs.checkpoint_value, "x" * 200)
    with pytest.raises(PayloadTooLarge, match="DBJOBS_MAX_CHECKPOINT_BYTES \\(100\\)"):
        run_jobs(raise_errors=True)
    job.refresh_from_db()
    assert job.checkpoint_state is None
    small = enqueue(long_jobs.checkpoint_value, ["a", 1])
    run_jobs()
    small.refresh_from_db()
    assert (small.return_value, small.resume) == (True, ["a", 1])


def test_progress_and_checkpoint_outside_their_running_job_are_refused():
    job = enqueue(long_jobs.checkpoint_value, 1)
    with pytest.raises(RuntimeError, match="current_job"):
        job.progress(1)
    with pytest.raises(RuntimeError, match="current_job"):
        job.checkpoint({"a": 1})
    assert not job.progress and job.progress.done is None and job.progress.eta is None


def test_progress_values_rate_and_time_left():
    first = report(None, 10, 100, "n" * (MAX_NOTE + 50))
    assert (first.done, first.total, len(first.note), first.rate, first.since_done) == (
        10,
        100,
        MAX_NOTE,
        None,
        10,
    )
    later = Progress(**{**_fields(first), "at": first.since + datetime.timedelta(seconds=2)})
    assert later.fraction == 0.1 and later.percent == 10
    second = report(first, 30, 100, "")
    assert second.since == first.since and second.rate is not None and second.rate > 0
    assert second.eta == pytest.approx((100 - 30) / second.rate)
    assert Progress.from_record(second.as_record()) == second
    assert Progress(5, 0).fraction == 1.0 and Progress(5).fraction is None and Progress(5).eta is None
    assert Progress.from_record({"done": "x"}) is None and Progress.from_record(None) is None
    for bad, error in [("1", TypeError), (True, TypeError), (-1, ValueError), (float("inf"), TypeError)]:
        with pytest.raises(error, match="progress\\(\\) takes done"):
            report(None, bad, None, "")
    with pytest.raises(TypeError, match="note as a string"):
        report(None, 1, None, 5)


def _fields(progress):
    return {name: getattr(progress, name) for name in Progress.__dataclass_fields__}


def test_a_note_no_database_stores_is_cleaned_and_the_outcome_is_stored():
    job = enqueue(long_jobs.odd_note)
    run_jobs()
    job.refresh_from_db()
    assert (job.status, job.return_value) == (JobStatus.SUCCESSFUL, "done")
    assert job.progress.note == "a\ufffdb?c"  # NUL and the lone surrogate replaced
    assert job.progress.rate is None or job.progress.rate < float("inf")


@pytest.mark.django_db(transaction=False)
def test_in_a_test_case_transaction_a_retry_resumes_from_its_failed_attempts_checkpoint_too():
    """run_jobs() inside the test's own transaction (Django's TestCase, pytest-django's default)."""
    job = enqueue(long_jobs.checkpoint_then_fail, 2)
    run_jobs(include_scheduled=True)
    job.refresh_from_db()
    assert (job.status, job.return_value) == (JobStatus.SUCCESSFUL, {"attempt": 1, "seen": None})
