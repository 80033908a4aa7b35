"""The enqueuer's context (language, timezone, DBJOBS_CONTEXT_CAPTURE) and async jobs."""

import datetime

import pytest
from django.utils import timezone, translation

from django_dbjobs import enqueue, enqueue_many
from django_dbjobs.exceptions import InvalidJobContext
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.signals import job_failed
from django_dbjobs.worker import Worker
from tests import context_hooks, jobs
from tests.tasks_helpers import tasks_or_skip

pytestmark = pytest.mark.django_db(transaction=True)

HOOKS = {
    "DBJOBS_CONTEXT_CAPTURE": "tests.context_hooks.capture",
    "DBJOBS_CONTEXT_RESTORE": "tests.context_hooks.restore",
}


@pytest.fixture
def hooks(settings):
    for name, value in HOOKS.items():
        setattr(settings, name, value)
    context_hooks.restored.clear()


def enqueue_in_a_request(target, *args, request_id="req-1", **options):
    token = context_hooks.request_id.set(request_id)
    try:
        with translation.override("fr"), timezone.override("Europe/Paris"):
            return target(*args, **options)
    finally:
        context_hooks.request_id.reset(token)


def test_the_enqueuers_language_timezone_and_hook_data_are_restored_for_the_job(hooks):
    job = enqueue_in_a_request(enqueue, jobs.environment)
    plain = enqueue(jobs.environment)
    assert Job.objects.get(pk=job.pk).context == {
        "language": "fr",
        "timezone": "Europe/Paris",
        "data": {"request_id": "req-1"},
    }
    assert Job.objects.get(pk=plain.pk).context is None  # all defaults: nothing stored
    Worker(burst=True, concurrency=1, prefetch=0).run()
    job.refresh_from_db()
    plain.refresh_from_db()
    assert job.return_value == {
        "language": "fr",
        "timezone": "Europe/Paris",
        "data": {"request_id": "req-1"},
        "request_id": "req-1",
    }
    # The next job on the same thread runs with the defaults again: nothing leaks.
    assert plain.return_value == {"language": "en-us", "timezone": "UTC", "data": None, "request_id": None}


def test_context_is_captured_once_for_enqueue_many(hooks):
    created = enqueue_in_a_request(enqueue_many, jobs.add, [(1, 2), (3, 4)])
    assert {tuple(sorted(Job.objects.get(pk=j.pk).context)) for j in created} == {
        ("data", "language", "timezone")
    }


def test_a_failure_is_recorded_and_signalled_inside_the_context(hooks, settings):
    settings.DBJOBS_RETRY_BACKOFF = 0
    seen = []

    def on_failed(sender, job, **kwargs):
        seen.append((translation.get_language(), context_hooks.request_id.get()))

    job_failed.connect(on_failed)
    try:
        job = enqueue_in_a_request(enqueue, jobs.always_fails, max_attempts=1)
        Worker(burst=True).run()
    finally:
        job_failed.disconnect(on_failed)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert seen == [("fr", "req-1")]


def test_a_restore_hook_that_raises_fails_the_attempt_instead_of_running_without_it(hooks):
    job = enqueue_in_a_request(enqueue, jobs.environment, request_id="refuse", max_attempts=1)
    after = enqueue(jobs.add, 1, 2)
    Worker(burst=True, concurrency=1).run()
    job.refresh_from_db()
    after.refresh_from_db()
    assert job.status == JobStatus.FAILED and "PermissionError: tenant unknown" in job.last_error
    assert job.return_value is None
    assert (after.status, after.return_value) == (JobStatus.SUCCESSFUL, 3)  # costs no other job


@pytest.mark.parametrize(
    ("hook", "message"),
    [("tests.context_hooks.capture_not_json", "not JSON"), ("tests.context_hooks.capture_a_list", "a dict")],
)
def test_a_capture_hook_returning_bad_data_is_a_clear_error_and_writes_nothing(settings, hook, message):
    settings.DBJOBS_CONTEXT_CAPTURE = hook
    with pytest.raises(InvalidJobContext, match=message):
        enqueue(jobs.add, 1, 2)
    assert not Job.objects.exists()


def test_a_scheduled_job_has_no_enqueuer_context(hooks):
    from django_dbjobs.models import Schedule
    from django_dbjobs.schedules import firing

    schedule = Schedule.objects.create(name="s", cron="* * * * *", job="tests.jobs.add", args=[1, 2])
    token = context_hooks.request_id.set("from-the-scheduler-thread")
    try:
        with translation.override("de"):
            job, _fields = firing.build_job(schedule, timezone.now(), "default")
    finally:
        context_hooks.request_id.reset(token)
    assert job.context is None


def test_async_jobs_run_on_an_event_loop_and_fail_like_any_job():
    slept = enqueue(jobs.async_sleep, 0.01, "done")
    failed = enqueue(jobs.async_fails)
    Worker(burst=True).run()
    slept.refresh_from_db()
    failed.refresh_from_db()
    assert (slept.status, slept.return_value) == (JobStatus.SUCCESSFUL, "done")
    assert failed.status == JobStatus.FAILED
    assert failed.errors[-1]["exception_class_path"] == "builtins.LookupError"


def test_ten_async_jobs_sleeping_one_second_run_at_the_same_time_on_one_worker(run_jobs):
    created = [enqueue(jobs.async_sleep, 1.0, n) for n in range(10)]
    worker = run_jobs("--burst", "--concurrency", "10")
    assert worker.wait() == 0, worker.output()
    rows = list(Job.objects.filter(pk__in=[j.pk for j in created]))
    assert {r.status for r in rows} == {JobStatus.SUCCESSFUL} and len(rows) == 10
    # They slept side by side, not in turn: all ten finished within a second of each other,
    # and the whole run took about one sleep (ten in turn would take ten).
    finishing = max(r.finished_at for r in rows) - min(r.finished_at for r in rows)
    assert finishing < datetime.timedelta(seconds=1), finishing
    span = max(r.finished_at for r in rows) - min(r.started_at for r in rows)
    assert span < datetime.timedelta(seconds=5), span


def test_a_running_async_job_does_not_keep_a_stopping_worker_alive(run_jobs, record_file):
    """Released at the second signal, its coroutine is cancelled: the process exits at once."""
    import signal
    import time

    from tests.conftest import wait_for

    job = enqueue(jobs.async_announce_sleep, 30, "late")
    worker = run_jobs()
    assert wait_for(lambda: "started:late" in record_file.read_text()), worker.output()
    worker.signal(signal.SIGTERM)
    time.sleep(0.3)
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0, worker.output()
    assert time.monotonic() - started < 5, worker.output()
    assert "Cancelled async jobs still running" in worker.output()
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.READY, 0)  # released uncharged, runs again
    assert record_file.read_text().split() == ["started:late"]  # the coroutine never went on


def test_a_job_that_activates_a_language_leaks_it_to_no_other_job():
    enqueue(jobs.activates_german)
    after = enqueue(jobs.environment)
    Worker(burst=True, concurrency=1, prefetch=0).run()
    after.refresh_from_db()
    assert after.return_value["language"] == "en-us" and after.return_value["timezone"] == "UTC"
    child = Job.objects.exclude(pk=after.pk).get(name="tests.jobs.environment")
    # The child was enqueued by code running in German: that is its enqueuer's context.
    assert child.context == {"language": "de", "timezone": "Asia/Tokyo"}
    assert child.return_value["language"] == "de" and child.return_value["timezone"] == "Asia/Tokyo"


@pytest.mark.parametrize(
    ("hook", "error"),
    [
        ("tests.context_hooks.restore_exits", "SystemExit: the hook exits"),
        ("tests.context_hooks.restore_not_a_context_manager", "must return a context manager"),
    ],
)
def test_a_restore_hook_that_exits_or_returns_junk_charges_the_attempt(settings, hook, error):
    settings.DBJOBS_CONTEXT_RESTORE = hook
    job = enqueue(jobs.add, 1, 2, max_attempts=2)
    for _ in range(2):  # each attempt, its retry made due at once
        Job.objects.filter(pk=job.pk, status=JobStatus.READY).update(run_at=timezone.now())
        Worker(burst=True).run()
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.FAILED, 2)
    assert error in job.last_error and job.return_value is None


def test_a_tasks_enqueuer_context_is_restored_too(hooks):
    tasks = tasks_or_skip()
    result = enqueue_in_a_request(tasks.environment.enqueue)
    Worker(burst=True, concurrency=1, prefetch=0).run()
    result.refresh()
    assert result.return_value == {
        "language": "fr",
        "timezone": "Europe/Paris",
        "data": {"request_id": "req-1"},
        "request_id": "req-1",
    }
    assert context_hooks.restored == [
        {"request_id": "req-1"},
        {"request_id": "req-1"},
    ]  # run, then its success
