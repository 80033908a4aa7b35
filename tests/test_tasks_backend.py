"""Django's Tasks framework on DatabaseBackend, through real workers, on every database."""

import datetime
import logging
import sys

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from django_dbjobs.exceptions import InvalidJobArguments, WorkerLost
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.worker import Worker
from django_dbjobs.worker.leases.sweep import sweep
from tests import jobs
from tests.tasks_helpers import tasks_or_skip

tasks = tasks_or_skip()

from django_dbjobs.backend import (  # noqa: E402
    DatabaseBackend,
    DatabaseTask,
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)
from django_dbjobs.backend.compat import TaskResultMismatch, task_backends  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def drain():
    """Run every job to its outcome in this process, retries included (due at once)."""
    for _ in range(20):
        due = timezone.now() - datetime.timedelta(seconds=1)
        Job.objects.filter(status=JobStatus.READY).update(run_at=due)
        Worker(burst=True, concurrency=2).run()
        if not Job.objects.filter(status__in=[JobStatus.READY, JobStatus.RUNNING]).exists():
            return
    raise AssertionError("jobs did not settle")


def test_enqueue_and_get_result_round_trip():
    result = tasks.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY and result.backend == "default"
    job = Job.objects.get(pk=result.id)
    assert (job.name, job.args, job.queue, job.priority) == ("tests.tasks.add", [2, 3], "default", 0)
    assert result.enqueued_at is not None and result.worker_ids == [] and result.attempts == 0
    with pytest.raises(ValueError, match="not finished"):
        _ = result.return_value
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.return_value == 5 and result.errors == []
    assert result.attempts == 1 and len(result.worker_ids) == 1
    assert result.started_at <= result.finished_at and result.last_attempted_at is not None
    again = tasks.add.get_result(result.id)
    assert (again.id, again.status, again.return_value, again.args) == (result.id, "SUCCESSFUL", 5, [2, 3])


def test_decorator_options_reach_the_row_and_the_result():
    result = tasks.send_welcome.enqueue(42)
    job = Job.objects.get(pk=result.id)
    assert (job.queue, job.priority) == ("emails", 10)
    assert (result.task.queue_name, result.task.priority) == ("emails", 10)
    override = tasks.send_welcome.using(priority=-5).enqueue(7)
    assert Job.objects.get(pk=override.id).priority == -5
    assert tasks.send_welcome.get_result(override.id).task.priority == -5


def test_running_status_while_claimed():
    result = tasks.add.enqueue(1, 1)
    with transaction.atomic():
        Job.objects.claim("w-test", 1)
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING and result.worker_ids == ["w-test"]
    with pytest.raises(ValueError, match="not finished"):
        _ = result.return_value


def test_retries_record_every_error_and_attempt():
    result = tasks.fails_until_attempt.enqueue(3)
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 3
    assert result.attempts == 3 and len(result.errors) == 2
    assert {e.exception_class_path for e in result.errors} == {"builtins.ConnectionError"}
    assert result.errors[0].exception_class is ConnectionError
    assert "attempt 1 failed" in result.errors[0].traceback


def test_a_failing_task_ends_failed_after_the_backend_max_attempts():
    result = tasks.always_fails.enqueue("nope")
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.is_finished
    assert result.attempts == 3 == len(result.errors)  # OPTIONS max_attempts
    assert "ValueError: nope" in result.errors[-1].traceback
    with pytest.raises(ValueError, match="failed"):
        _ = result.return_value
    assert Job.objects.get(pk=result.id).status == JobStatus.FAILED  # a dead letter in the admin


def test_run_after_is_respected():
    later = timezone.now() + datetime.timedelta(hours=1)
    result = tasks.add.using(run_after=later).enqueue(1, 2)
    Worker(burst=True).run()
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert abs((Job.objects.get(pk=result.id).run_at - later).total_seconds()) < 1
    with pytest.raises(InvalidTask, match="aware"):
        tasks.add.using(run_after=datetime.datetime(2030, 1, 1))


def test_higher_priority_runs_first(record_file):
    for priority in (-10, 50, 0, 100):
        tasks.record.using(priority=priority).enqueue(priority)
    Worker(burst=True, concurrency=1, prefetch=0).run()
    assert record_file.read_text().split() == ["100", "50", "0", "-10"]


def test_queues_outside_the_backend_queues_are_refused_before_anything_is_written():
    with pytest.raises(InvalidTask, match="Queue 'other'"):
        tasks.add.using(queue_name="other")
    assert not Job.objects.exists()


def test_takes_context_gets_the_right_attempt():
    result = tasks.with_context.enqueue("v")
    retried = tasks.context_fails_once.enqueue()
    drain()
    result.refresh()
    retried.refresh()
    assert result.return_value == {"attempt": 1, "id": result.id, "value": "v"}
    assert retried.return_value == 2 and retried.attempts == 2


def test_async_tasks_run_and_keep_djangos_async_safety():
    slept = tasks.async_sleep.enqueue(0.05, "awake")
    counted = tasks.async_counts_jobs.enqueue()
    direct = tasks.async_uses_orm_directly.enqueue()
    drain()
    slept.refresh()
    counted.refresh()
    direct.refresh()
    assert slept.return_value == "awake"
    assert counted.return_value == 3
    assert direct.status == TaskResultStatus.FAILED
    assert direct.errors[-1].exception_class_path == "django.core.exceptions.SynchronousOnlyOperation"


def test_signals_are_sent_with_the_backend_and_task_result():
    seen = []

    def on_enqueued(sender, task_result, **kwargs):
        seen.append(("enqueued", sender, task_result.status, task_result.attempts))

    def on_started(sender, task_result, **kwargs):
        seen.append(("started", sender, task_result.status, task_result.attempts))

    def on_finished(sender, task_result, **kwargs):
        exc = sys.exc_info()[1]
        seen.append(("finished", sender, task_result.status, type(exc).__name__ if exc else None))
        times.append((task_result.started_at, task_result.last_attempted_at, task_result.finished_at))

    times = []

    task_enqueued.connect(on_enqueued)
    task_started.connect(on_started)
    task_finished.connect(on_finished)
    try:
        tasks.add.enqueue(1, 2)
        drain()
        assert seen == [
            ("enqueued", DatabaseBackend, "READY", 0),
            ("started", DatabaseBackend, "RUNNING", 1),
            ("finished", DatabaseBackend, "SUCCESSFUL", None),
        ]
        seen.clear()
        tasks.always_fails.enqueue()
        drain()
        # One start per attempt; finished once, for the final outcome, inside the exception handler.
        assert [s[0] for s in seen] == ["enqueued", "started", "started", "started", "finished"]
        assert seen[-1] == ("finished", DatabaseBackend, "FAILED", "ValueError")
        for started, attempted, finished in times:  # as Django's own backends fill them in
            assert isinstance(started, datetime.datetime) and isinstance(finished, datetime.datetime)
            assert started <= attempted <= finished + datetime.timedelta(seconds=1)
    finally:
        task_enqueued.disconnect(on_enqueued)
        task_started.disconnect(on_started)
        task_finished.disconnect(on_finished)


def test_djangos_logging_receiver_gets_the_traceback(caplog):
    tasks.always_fails.enqueue("logged")
    with caplog.at_level("ERROR", logger="django.tasks"):
        drain()
    records = [r for r in caplog.records if r.name == "django.tasks" and "FAILED" in r.getMessage()]
    if not records:  # the django-tasks backport logs under its own name
        records = [r for r in caplog.records if "state=FAILED" in r.getMessage()]
    assert records and records[0].exc_info and records[0].exc_info[0] is ValueError


def test_a_task_whose_worker_was_lost_on_its_last_attempt_is_logged_once(caplog):
    from tests.test_sweep import claim, claim_alone

    result = tasks.add.enqueue(1, 2)
    Job.objects.filter(pk=result.id).update(max_attempts=1)
    claim("dead-0")
    sweep("sweeper", timeout=30)  # not charged: nobody knows the task had started
    claim_alone("dead-1")
    with caplog.at_level("DEBUG", logger="django_dbjobs"):
        sweep("sweeper", timeout=30)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "state=FAILED" in record.getMessage() and record.exc_info[0] is WorkerLost
    assert str(record.exc_info[1]).startswith("worker dead-1 stopped heartbeating"), record.exc_info[1]


def test_results_of_other_tasks_and_unknown_ids_are_refused():
    result = tasks.send_welcome.enqueue(1)
    with pytest.raises(TaskResultMismatch):
        tasks.add.get_result(result.id)
    for unknown in ("00000000-0000-0000-0000-000000000000", "not-an-id", ""):
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result(unknown)
    plain_job = jobs.add.enqueue(1, 2)  # a @job, not a task: no TaskResult for it
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(plain_job.pk)


def test_arguments_are_normalised_to_json_and_bad_ones_refused_without_writing():
    result = tasks.add.enqueue((1, 2), {"a": (3,)})
    assert result.args == [[1, 2], {"a": [3]}]
    assert Job.objects.get(pk=result.id).args == [[1, 2], {"a": [3]}]
    with pytest.raises(InvalidJobArguments):
        tasks.add.enqueue(object(), 1)
    with pytest.raises(InvalidJobArguments, match="arguments do not fit"):
        tasks.add.enqueue(1, 2, 3)
    with pytest.raises(InvalidJobArguments, match="arguments do not fit"):
        tasks.with_context.enqueue()  # the context is the worker's to pass, `value` is missing
    assert Job.objects.count() == 1


def test_enqueue_rolls_back_with_the_callers_transaction():
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            result = tasks.add.enqueue(1, 2)
            assert Job.objects.filter(pk=result.id).exists()
            raise RuntimeError("the view failed")
    assert not Job.objects.exists()
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)


@pytest.mark.skipif(not getattr(tasks, "EXTRA_ARGUMENTS", False), reason="@task(...) extras: Django 6.1+")
def test_a_held_unique_key_returns_the_holder_and_signals_nothing():
    signalled = []

    def on_enqueued(sender, task_result, **kwargs):
        signalled.append(task_result.id)

    task_enqueued.connect(on_enqueued)
    try:
        first = tasks.sync_account.enqueue(1)
        again = tasks.sync_account.enqueue(1)
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert again.id == first.id and signalled == [first.id] and Job.objects.count() == 1
    with pytest.raises(InvalidJobArguments, match="arguments do not fit"):
        tasks.sync_account.enqueue()  # checked before the key function is called with them
    assert Job.objects.count() == 1


@pytest.mark.skipif(not getattr(tasks, "EXTRA_ARGUMENTS", False), reason="@task(...) extras: Django 6.1+")
def test_task_extra_arguments_max_attempts_and_unique_key():
    gave_up = tasks.fails_twice_then_gives_up.enqueue()
    first = tasks.sync_account.enqueue(1)
    assert tasks.sync_account.enqueue(1).id == first.id  # the active run holds the key
    other = tasks.sync_account.enqueue(2)
    assert other.id != first.id
    report = tasks.nightly_report.enqueue()
    assert tasks.nightly_report.enqueue().id == report.id
    drain()
    gave_up.refresh()
    assert gave_up.status == TaskResultStatus.FAILED and gave_up.attempts == 2
    assert tasks.sync_account.enqueue(1).id != first.id  # finished: the key is free again


@pytest.mark.skipif(not getattr(tasks, "EXTRA_ARGUMENTS", False), reason="@task(...) extras: Django 6.1+")
def test_a_task_past_its_timeout_fails_with_a_timeout_error():
    result = tasks.spins_past_its_timeout.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[-1].exception_class_path == "django_dbjobs.exceptions.JobTimeout"
    assert "timeout of 0.3s" in result.errors[-1].traceback


def test_invalid_task_options_are_refused_at_definition():
    def module_level_like(x):
        return x

    module_level_like.__qualname__ = "module_level_like"
    with pytest.raises(InvalidTask, match="max_attempts"):
        DatabaseTask(func=module_level_like, max_attempts=0)
    with pytest.raises(InvalidTask, match="backoff"):
        DatabaseTask(func=module_level_like, backoff=-1)
    with pytest.raises(InvalidTask, match="unique_key"):
        DatabaseTask(func=module_level_like, unique_key=3)
    with pytest.raises(InvalidTask, match="timeout"):
        DatabaseTask(func=module_level_like, timeout=0)


def test_a_task_not_found_at_its_module_path_is_refused():
    def hidden(x):
        return x

    hidden.__qualname__ = "hidden"
    hidden.__module__ = "tests.tasks"
    with pytest.raises(InvalidTask, match="does not name this task"):
        DatabaseTask(func=hidden).enqueue(1)
    assert not Job.objects.exists()


def test_a_task_workers_would_not_import_is_enqueued_with_a_warning(caplog):
    from django_dbjobs.exceptions import UnimportedJobWarning
    from django_dbjobs.registry import discovery
    from tests.task_elsewhere import stray

    discovery.forget()
    with caplog.at_level("WARNING", logger="django_dbjobs"), pytest.warns(UnimportedJobWarning) as warned:
        stray.enqueue(1)
        stray.enqueue(2)
    assert len(warned) == 1
    warnings = [r.getMessage() for r in caplog.records if "workers do not import" in r.getMessage()]
    assert len(warnings) == 1 and "tests.task_elsewhere" in warnings[0]
    with caplog.at_level("WARNING", logger="django_dbjobs"):
        tasks.add.enqueue(1, 2)  # in the tests app's tasks module: no warning
    assert len([r for r in caplog.records if "workers do not import" in r.getMessage()]) == 1


def test_only_tasks_bound_to_this_backend_are_run():
    assert tasks.foreign.get_backend().__class__.__name__ == "ImmediateBackend"
    job = Job.objects.create(name="tests.tasks.foreign", args=[1])
    Worker(burst=True).run()
    job.refresh_from_db()
    assert job.status == JobStatus.READY and job.attempts == 0  # handed back unknown, never called
    assert "not a registered job" in job.last_error


def test_backend_check_reports_configuration_problems():
    backend = DatabaseBackend(
        "jobs", {"QUEUES": ["ok", "not a queue!"], "OPTIONS": {"max_attempts": 0, "retries": 1}}
    )
    ids = sorted(error.id for error in backend.check())
    assert ids == ["dbjobs.E023", "dbjobs.E024", "dbjobs.E024"]
    (timeout,) = DatabaseBackend("x", {"OPTIONS": {"timeout": -1}}).check()
    assert timeout.id == "dbjobs.E024" and "timeout" in timeout.msg
    assert DatabaseBackend("default", {"OPTIONS": {"max_attempts": 2, "backoff": 1.5}}).check() == []


def test_backend_check_reports_queues_outside_dbjobs_queues(settings):
    settings.DBJOBS_QUEUES = ["default"]
    (error,) = DatabaseBackend("default", {"QUEUES": ["default", "emails"]}).check()
    assert error.id == "dbjobs.E023" and "'emails' is not one of DBJOBS_QUEUES" in error.msg


def test_one_database_backend_alias_serves_every_task(settings):
    settings.TASKS = {
        **settings.TASKS,
        "second": {"BACKEND": "django_dbjobs.backend.DatabaseBackend", "QUEUES": []},
    }
    with pytest.raises(InvalidTask, match="one DatabaseBackend alias serves all tasks"):
        tasks.add.using(backend="second")
    result = tasks.add.enqueue(1, 2)  # the first alias is untouched
    assert tasks.add.get_result(result.id).backend == "default"
    assert [e.id for e in task_backends["second"].check()] == ["dbjobs.E026"]
    assert task_backends["default"].check() == []


def test_a_task_dead_lettered_by_the_sweep_sends_task_finished():
    from django_dbjobs.models import Isolation
    from django_dbjobs.worker.leases.sweep import sweep

    finished = []

    def on_finished(sender, task_result, **kwargs):
        finished.append((task_result.status, task_result.errors[-1].exception_class_path, task_result.args))

    result = tasks.add.enqueue(5, 6)
    Job.objects.filter(pk=result.id).update(
        status=JobStatus.RUNNING, worker="dead:1:x", attempts=3, max_attempts=3, isolation=Isolation.STARTED
    )
    task_finished.connect(on_finished)
    try:
        sweep("sweeper", timeout=30)
    finally:
        task_finished.disconnect(on_finished)
    assert finished == [("FAILED", "django_dbjobs.exceptions.WorkerLost", [5, 6])]


def test_backend_check_reports_the_app_not_installed():
    from django.apps import apps
    from django.test.utils import override_settings

    from tests.settings import INSTALLED_APPS

    backend = DatabaseBackend("default", {})
    with override_settings(INSTALLED_APPS=[app for app in INSTALLED_APPS if app != "django_dbjobs"]):
        assert not apps.is_installed("django_dbjobs")
        assert [error.id for error in backend.check()] == ["dbjobs.E022"]
    assert backend.check() == []


def test_a_task_and_a_job_run_side_by_side_in_a_real_worker(run_jobs):
    task_result = tasks.add.enqueue(20, 22)
    job = jobs.add.enqueue(1, 2)
    worker = run_jobs("--burst")
    assert worker.wait() == 0, worker.output()
    task_result.refresh()
    job.refresh_from_db()
    assert (task_result.status, task_result.return_value) == ("SUCCESSFUL", 42)
    assert (job.status, job.return_value) == (JobStatus.SUCCESSFUL, 3)
    assert task_result.worker_ids == job.worker_ids


def test_async_enqueue_and_get_result():
    async def from_async_code():
        result = await tasks.add.aenqueue(4, 5)
        return result, await tasks.add.aget_result(result.id)

    result, fetched = async_to_sync(from_async_code)()
    assert fetched.id == result.id and fetched.status == TaskResultStatus.READY and fetched.args == [4, 5]


def test_run_jobs_prints_a_failed_tasks_traceback_once(run_jobs):
    """Django's default LOGGING prints its task logger only with DEBUG on: the worker prints it."""
    result = tasks.always_fails.enqueue("kaput")
    Job.objects.filter(pk=result.id).update(max_attempts=1)
    worker = run_jobs("--burst")
    assert worker.wait() == 0
    output = worker.output()
    assert output.count("Traceback (most recent call last)") == 1, output
    assert output.count("ValueError: kaput") == 1, output
    assert f"id={result.id}" in output and "FAILED" in output, output


@pytest.mark.skipif(not getattr(tasks, "EXTRA_ARGUMENTS", False), reason="@task(...) extras: Django 6.1+")
def test_a_task_concurrency_key_waits_for_its_slot():
    results = [tasks.fetch_mail.enqueue(7, n) for n in range(3)]
    keyed = Job.objects.get(pk=results[0].id)
    assert (keyed.concurrency_key, keyed.concurrency_limit, keyed.blocked) == ("mailbox:7", 2, "CONCURRENCY")
    drain()
    for result in results:
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL


@pytest.mark.skipif(not getattr(tasks, "EXTRA_ARGUMENTS", False), reason="@task(...) extras: Django 6.1+")
def test_a_cancelled_task_is_failed_with_the_cancellation_error(run_jobs, tmp_path):
    import signal

    from tests.conftest import wait_for

    started = tmp_path / "started"
    result = tasks.runs_until_cancelled.enqueue(str(started))
    worker = run_jobs()
    assert wait_for(started.exists, timeout=20)
    assert Job.objects.filter(pk=result.id).cancel() == 1
    assert wait_for(
        lambda: tasks.runs_until_cancelled.get_result(result.id).status == TaskResultStatus.FAILED
    )
    result.refresh()
    assert result.errors[-1].exception_class_path == "django_dbjobs.exceptions.JobCancelled"
    assert result.attempts == 1
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


@pytest.mark.skipif(not getattr(tasks, "EXTRA_ARGUMENTS", False), reason="@task(...) extras: Django 6.1+")
def test_the_backend_concurrency_limit_is_the_default_of_tasks_with_a_key(settings):
    settings.TASKS = {
        "default": {
            "BACKEND": "django_dbjobs.backend.DatabaseBackend",
            "OPTIONS": {"concurrency_limit": 4},
        }
    }
    plain = tasks.add.enqueue(1, 2)  # no key: the option does not apply
    assert Job.objects.get(pk=plain.id).concurrency_key is None
    Job.objects.all().delete()
    keyed = tasks.fetch_mail.enqueue(1)  # its own limit: 2
    assert Job.objects.get(pk=keyed.id).concurrency_limit == 2
    defaulted = tasks.check_inbox.enqueue(1)  # a key without a limit: the backend's
    assert Job.objects.get(pk=defaulted.id).concurrency_limit == 4


def test_tasks_join_an_open_batch_and_wait_in_an_after_block():
    from django_dbjobs import after, batch
    from django_dbjobs.exceptions import InvalidJob
    from django_dbjobs.models import Batch

    with pytest.raises(InvalidJob), batch(on_complete=tasks.add):  # add(a, b) cannot take the summary
        pass
    with batch(description="tasks", on_complete=tasks.batch_total) as opened:
        first = tasks.add.enqueue(1, 2)
        with after(first):
            second = tasks.send_welcome.enqueue(7)
    assert Job.objects.filter(batch=opened).count() == 2
    assert Job.objects.get(pk=second.id).blocked == "AFTER"
    drain()
    second.refresh()
    assert second.status == TaskResultStatus.SUCCESSFUL
    opened = Batch.objects.get(pk=opened.pk)
    assert (opened.succeeded, opened.failed) == (2, 0)
    callback = Job.objects.get(pk=opened.on_complete)
    assert (callback.name, callback.status, callback.return_value) == (
        "tests.tasks.batch_total",
        JobStatus.SUCCESSFUL,
        "tasks:2",
    )
