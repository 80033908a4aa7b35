"""ResumeLater: a job hands itself back READY, its attempt not charged, its checkpoint kept."""

import datetime

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from django_dbjobs import ResumeLater, enqueue
from django_dbjobs.models import Blocked, Job, JobStatus
from django_dbjobs.models.cancelling import HANDED_BACK
from django_dbjobs.models.long_work import stopping_workers
from django_dbjobs.observability import run_hooks
from django_dbjobs.signals import job_failed, job_finished
from django_dbjobs.testing import run_jobs
from django_dbjobs.worker import Worker
from tests import jobs, resumable_jobs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def finished_signals():
    sent = []

    def receiver(sender, job, **kwargs):
        sent.append((job.pk, kwargs.get("status")))

    job_finished.connect(receiver, weak=False)
    job_failed.connect(receiver, weak=False)
    yield sent
    job_finished.disconnect(receiver)
    job_failed.disconnect(receiver)


@pytest.fixture
def outcomes():
    """What the metrics and traces are told (run_hooks' outcome listeners)."""
    told = []

    def listener(job, status, failure):
        told.append((job.pk, status))

    run_hooks.add_listener(listener)
    yield told
    run_hooks.remove(listener)


def test_a_job_handing_itself_back_is_ready_later_uncharged_with_its_checkpoint(finished_signals, outcomes):
    job = enqueue(resumable_jobs.hand_back_once, 60)
    before = timezone.now()
    (ran,) = run_jobs()  # due in a minute: not run again now
    assert (ran.status, ran.attempts, ran.pickups, ran.worker, ran.worker_ids) == (
        JobStatus.READY,
        0,
        1,
        None,
        [],
    )
    assert ran.resume == {"handed": "back"} and ran.errors == [] and ran.last_error == ""
    assert (
        before + datetime.timedelta(seconds=55) < ran.run_at < timezone.now() + datetime.timedelta(seconds=65)
    )
    assert finished_signals == [] and outcomes == [], "a hand-back is no outcome, and no failure"
    (again,) = run_jobs(include_scheduled=True)
    assert (again.status, again.attempts, again.pickups) == (JobStatus.SUCCESSFUL, 1, 2)
    assert again.return_value == {"handed": "back"}
    assert finished_signals == outcomes == [(job.pk, JobStatus.SUCCESSFUL)]


def test_a_job_handing_itself_back_keeps_its_last_progress_report():
    """Written by the hand-back's own UPDATE: the report made after the last checkpoint."""
    job = enqueue(resumable_jobs.report_then_hand_back)
    (ran,) = run_jobs()
    assert ran.status == JobStatus.READY
    job.refresh_from_db()
    assert (job.progress.done, job.progress.total, job.progress.note) == (6, 10, "after the checkpoint")
    (again,) = run_jobs(include_scheduled=True)
    assert (again.status, again.return_value) == (JobStatus.SUCCESSFUL, 6)


def test_a_job_handing_itself_back_at_once_runs_again_in_the_same_run_jobs_call():
    job = enqueue(resumable_jobs.hand_back_once)
    ran = run_jobs()
    assert [r.status for r in ran] == [JobStatus.READY, JobStatus.SUCCESSFUL]
    job.refresh_from_db()
    assert (job.attempts, job.pickups, job.return_value) == (1, 2, {"handed": "back"})


def test_run_jobs_keeps_the_writes_of_a_job_that_handed_itself_back():
    """As a worker would: handing back fails at nothing, so its savepoint is not rolled back."""
    enqueue(resumable_jobs.hand_back_once, 60, kwargs={"group": "written before the hand-back"})
    run_jobs()
    assert Group.objects.filter(name="written before the hand-back").exists()


def test_a_job_that_always_hands_itself_back_is_stopped_by_max_jobs_with_a_clear_error():
    enqueue(resumable_jobs.always_hands_back)
    with pytest.raises(RuntimeError, match=r"hand itself back \(raise ResumeLater\) every time"):
        run_jobs(max_jobs=5)
    assert Job.objects.get().attempts == 0


def test_a_keyed_job_handing_itself_back_frees_its_concurrency_slot():
    first = enqueue(resumable_jobs.hand_back_once, 60, concurrency_key="k", concurrency_limit=1)
    second = enqueue(jobs.add, 1, 2, concurrency_key="k", concurrency_limit=1)
    ran = run_jobs()
    assert [r.pk for r in ran] == [first.pk, second.pk]
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.blocked, first.attempts) == (JobStatus.READY, Blocked.CONCURRENCY, 0)
    assert (second.status, second.return_value) == (JobStatus.SUCCESSFUL, 3)
    run_jobs(include_scheduled=True)
    first.refresh_from_db()
    assert (first.status, first.attempts) == (JobStatus.SUCCESSFUL, 1)


def test_a_job_asked_to_stop_that_hands_itself_back_is_recorded_cancelled(finished_signals):
    job = enqueue(resumable_jobs.hand_back_once, kwargs={"cancel": True})
    (ran,) = run_jobs()
    assert (ran.status, ran.attempts, ran.last_error) == (JobStatus.FAILED, 0, HANDED_BACK)
    assert ran.errors[-1]["exception_class_path"] == "django_dbjobs.exceptions.JobCancelled"
    assert ran.resume == {"handed": "back"}
    assert (job.pk, JobStatus.FAILED) in finished_signals and (job.pk, None) in finished_signals


@pytest.mark.parametrize("delay", [-1, "5", 10**12, True, None])
def test_a_bad_delay_fails_the_job_with_a_clear_error(delay):
    job = enqueue(resumable_jobs.hands_back_with, delay)
    with pytest.raises(ValueError, match=r"ResumeLater\(delay\) takes a number of seconds"):
        run_jobs(raise_errors=True)
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.FAILED, 1)


def test_resume_later_is_not_an_exception_a_job_swallows_by_accident():
    assert not issubclass(ResumeLater, Exception)
    assert ResumeLater(2).delay == 2.0 and ResumeLater().delay == 0.0


def test_a_stopping_worker_tells_its_own_jobs_only_until_it_has_stopped():
    job = enqueue(jobs.add, 1, 2)
    worker, other = Worker(burst=True), Worker(burst=True)
    job.worker = worker.id
    worker.stop()
    assert job.stopping and worker.id in stopping_workers
    job.worker = other.id
    assert not job.stopping, "another worker of this process is not stopping"
    worker.run()  # stopped before it began: starts, claims nothing, stops
    assert worker.id not in stopping_workers
    job.worker = worker.id
    assert not job.stopping
