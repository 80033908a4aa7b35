"""Django's own tests/tasks assertions (Django 6.1), checked against DatabaseBackend on every database.

Written here from Django 6.1.3's tests/tasks (test_immediate_backend.py, test_tasks.py),
not copied: every assertion of theirs that depends on the backend (enqueue, results,
errors, context, signals and logging, async, validation on enqueue). Their tests of the
Task class alone (using(), call(), names, get_backend(), pickling a Task) do not depend
on the backend and are not repeated. Where Django's immediate backend runs a task
inside enqueue(), a worker runs it here (testing.run_jobs(), or a Worker where what a
worker logs is the point). Where our backend differs on purpose (docs/tasks.rst, "Where
it differs from Django's backends"), the test checks our documented behaviour instead
and says so.
"""

import dataclasses
import datetime
import logging
import os
import pickle
import sys
import traceback
import uuid

import pytest
from asgiref.sync import async_to_sync

import django_dbjobs
from django_dbjobs import testing
from django_dbjobs.exceptions import InvalidJobArguments
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.worker import Worker
from tests.tasks_helpers import tasks_or_skip

tasks = tasks_or_skip()

from django_dbjobs.backend import (  # noqa: E402
    DatabaseBackend,
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)
from django_dbjobs.backend.compat import Task, TaskResultMismatch, task_backends  # noqa: E402

try:
    from django.tasks.signals import logger as tasks_logger
except ImportError:  # the backport logs under "django_tasks"
    from django_tasks.signals import logger as tasks_logger

pytestmark = pytest.mark.django_db
PACKAGE_DIR = os.path.dirname(django_dbjobs.__file__)


@pytest.fixture
def one_attempt(settings):
    """Allow each task one attempt, as Django's immediate backend runs it (ours retries)."""
    default = settings.TASKS["default"]
    settings.TASKS = {**settings.TASKS, "default": {**default, "OPTIONS": {"max_attempts": 1}}}


@pytest.fixture
def logs(caplog):
    """caplog, with every record of Django's task logger and ours, DEBUG included."""
    with caplog.at_level(logging.DEBUG, logger=tasks_logger.name):
        with caplog.at_level(logging.DEBUG, logger="django_dbjobs"):
            yield caplog


def run_and_refresh(result):
    testing.run_jobs(include_scheduled=True)
    result.refresh()
    return result


def assert_finished_in_order(result):
    assert result.is_finished
    assert None not in (result.started_at, result.last_attempted_at, result.finished_at)
    assert result.enqueued_at <= result.started_at <= result.finished_at


def frames_of(exc_traceback) -> list[str]:
    """The functions of a traceback, outermost first; none of them may be django_dbjobs's."""
    frames = traceback.extract_tb(exc_traceback)
    assert not [frame for frame in frames if frame.filename.startswith(PACKAGE_DIR)], frames
    return [frame.name for frame in frames]


# Enqueue


@pytest.mark.parametrize("name", ["takes_anything", "takes_anything_async"])
def test_an_enqueued_task_is_ready_then_run_once(name):
    task = getattr(tasks, name)
    result = task.enqueue(1, two=3)
    assert (result.status, result.is_finished, result.attempts) == (TaskResultStatus.READY, False, 0)
    assert (result.started_at, result.last_attempted_at, result.finished_at) == (None, None, None)
    with pytest.raises(ValueError, match="Task has not finished yet"):
        _ = result.return_value
    assert (result.task, result.args, result.kwargs) == (task, [1], {"two": 3})
    run_and_refresh(result)
    assert (result.status, result.return_value, result.attempts) == (TaskResultStatus.SUCCESSFUL, None, 1)
    assert_finished_in_order(result)
    assert (result.task, result.args, result.kwargs) == (task, [1], {"two": 3})


def test_ids_are_uuid7_strings():  # differs on purpose: Django's own backends make random strings
    assert uuid.UUID(tasks.takes_anything.enqueue().id).version == 7


@pytest.mark.parametrize(
    "arguments, message",
    [
        (((datetime.datetime.now(),), {}), "args[0] is a datetime, which is not JSON data."),
        (((), {"when": {1, 2}}), "kwargs['when'] is a set, which is not JSON data."),
    ],
    ids=["datetime", "set"],
)
def test_arguments_that_are_not_json_raise_type_error_and_write_nothing(arguments, message):
    args, kwargs = arguments
    with pytest.raises(TypeError) as raised:
        tasks.takes_anything.enqueue(*args, **kwargs)
    assert isinstance(raised.value, InvalidJobArguments) and isinstance(raised.value, ValueError)
    # Django's words (assertRaisesMessage(TypeError, "Unsupported type")), and ours.
    assert "Unsupported type" in str(raised.value) and message in str(raised.value)
    with pytest.raises(TypeError, match="Unsupported type") as raised:
        async_to_sync(tasks.takes_anything.aenqueue)(*args, **kwargs)
    assert message in str(raised.value)
    assert not Job.objects.exists()


def test_djangos_validation_runs_on_enqueue(settings):
    with pytest.raises(InvalidTask, match="priority must be a whole number between -100 and 100"):
        tasks.takes_anything.using(priority=101)
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        tasks.takes_anything.using(run_after=datetime.datetime(2030, 1, 1))
    emails = tasks.takes_anything.using(queue_name="emails")
    settings.TASKS = {**settings.TASKS, "default": {**settings.TASKS["default"], "QUEUES": ["default"]}}
    with pytest.raises(InvalidTask, match="Queue 'emails' is not valid for backend"):
        emails.enqueue()
    with pytest.raises(InvalidTask, match="Queue 'emails' is not valid for backend"):
        async_to_sync(emails.aenqueue)()
    assert not Job.objects.exists()


def test_priority_queue_and_run_after_are_stored_and_honoured():
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    result = tasks.takes_anything.using(priority=100, queue_name="emails", run_after=later).enqueue()
    assert (result.task.priority, result.task.queue_name, result.task.run_after) == (100, "emails", later)
    job = Job.objects.get(pk=result.id)
    assert (job.priority, job.queue, job.run_at) == (100, "emails", later)
    assert testing.run_jobs() == [], "not due before run_after (DatabaseBackend supports defer)"
    result.refresh()
    assert result.status == TaskResultStatus.READY


def test_a_task_enqueued_in_a_transaction_commits_or_rolls_back_with_it():
    # Differs on purpose: Django's immediate backend runs the task inside enqueue(), whatever
    # the transaction; ours writes it in the caller's transaction.
    from django.db import transaction

    with transaction.atomic():
        kept = tasks.takes_anything.enqueue()
        with transaction.atomic():
            dropped = tasks.takes_anything.enqueue()
            transaction.set_rollback(True)
    assert list(Job.objects.values_list("pk", flat=True)) == [kept.id]
    assert dropped.status == TaskResultStatus.READY
    with pytest.raises(TaskResultDoesNotExist):
        tasks.takes_anything.get_result(dropped.id)


# Results


def test_results_round_trip_through_get_result_and_refresh():
    result = task_backends["default"].enqueue(tasks.answer, [], {})
    assert tasks.answer.get_result(result.id) == result
    before = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == before
    run_and_refresh(result)
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    assert tasks.answer.get_result(result.id) == result


@pytest.mark.skipif("__reduce__" not in vars(Task), reason="the django-tasks backport cannot pickle a Task")
def test_results_pickle():
    result = tasks.answer.enqueue()
    assert pickle.loads(pickle.dumps(result)) == result
    run_and_refresh(result)
    assert pickle.loads(pickle.dumps(result)) == result


def test_a_missing_or_foreign_result_is_refused():
    with pytest.raises(TaskResultDoesNotExist):
        tasks.answer.get_result("123")
    other = tasks.takes_anything_async.enqueue()
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        tasks.answer.get_result(other.id)


# Errors


@pytest.mark.parametrize(
    "name, exception, message",
    [
        ("raises_value_error", ValueError, "the task raised ValueError"),
        ("raises_system_exit", SystemExit, "the task raised SystemExit"),
        # Differs on purpose: Django's immediate backend re-raises KeyboardInterrupt (Ctrl-C in
        # the caller's process); ours records it as the task's failure, as a worker must.
        ("raises_keyboard_interrupt", KeyboardInterrupt, "the task raised KeyboardInterrupt"),
    ],
)
def test_a_failed_task_records_its_exception_and_traceback(one_attempt, name, exception, message):
    result = run_and_refresh(getattr(tasks, name).enqueue())
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    assert_finished_in_order(result)
    assert len(result.errors) == 1 and result.errors[0].exception_class is exception
    stored = result.errors[0].traceback
    assert stored.endswith(f"{exception.__name__}: {message}\n") and PACKAGE_DIR not in stored, stored
    assert (result.args, result.kwargs) == ([], {})


def test_a_keyboard_interrupt_is_retried_like_any_failure():  # differs on purpose, as above
    result = run_and_refresh(tasks.raises_keyboard_interrupt.enqueue())
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 3)  # OPTIONS max_attempts
    assert [error.exception_class for error in result.errors] == [KeyboardInterrupt] * 3


def test_an_exception_holding_another_keeps_its_source_line(one_attempt):
    result = run_and_refresh(tasks.raises_an_exception_holding_one.enqueue())
    assert result.status == TaskResultStatus.FAILED and result._return_value is None
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("the inner error"))' in result.errors[0].traceback


def test_a_return_value_that_is_not_json_is_recorded_as_a_type_error():
    result = run_and_refresh(tasks.returns_a_function.enqueue())
    assert result.status == TaskResultStatus.FAILED and result._return_value is None
    assert result.attempts == 1  # the task ran: not retried
    assert_finished_in_order(result)
    assert result.errors[0].exception_class is TypeError
    assert "Unsupported type" in result.errors[0].traceback  # Django's words
    assert result.errors[0].traceback == (
        "TypeError: The job ran, but its return value is a function, which is not JSON data. "
        "Return ids, strings, numbers, lists and dicts. Unsupported type: <class 'function'>.\n"
    )
    assert "database" not in Job.objects.get(pk=result.id).last_error  # no database was asked


# Context


def test_a_task_taking_context_gets_its_result_and_attempt():
    own_id = tasks.returns_its_id.enqueue()
    checked = tasks.checks_its_context.enqueue(1)
    testing.run_jobs()
    own_id.refresh()
    checked.refresh()
    assert own_id.return_value == own_id.id
    assert checked.status == TaskResultStatus.SUCCESSFUL


def test_unknown_names_are_handed_back_not_failed():  # differs on purpose: a newer worker may know it
    job = Job.objects.create(name="tests.tasks.defined_by_the_next_release")
    testing.run_jobs()
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.READY, 0)


# Signals and logging


def test_djangos_logger_records_enqueue_start_and_finish(logs):
    result = tasks.takes_anything.enqueue()
    testing.run_jobs()
    messages = [r.getMessage() for r in logs.records if r.name == tasks_logger.name]
    assert len(messages) == 3 and all(result.id in message for message in messages), messages
    assert "enqueued" in messages[0] and "state=RUNNING" in messages[1] and "state=SUCCESSFUL" in messages[2]
    assert not [message for message in messages if "None" in message]


def test_signals_carry_the_backend_and_the_result(one_attempt):
    seen = []

    def receiver(signal, sender, task_result, **kwargs):
        failure = sys.exc_info()[1]
        frames = frames_of(failure.__traceback__) if failure else None
        seen.append((signal, sender, task_result.status, type(failure).__name__ if failure else None, frames))

    for signal in (task_enqueued, task_started, task_finished):
        signal.connect(receiver)
    try:
        tasks.raises_value_error.enqueue()
        testing.run_jobs()
    finally:
        for signal in (task_enqueued, task_started, task_finished):
            signal.disconnect(receiver)
    assert seen == [
        (task_enqueued, DatabaseBackend, "READY", None, None),
        (task_started, DatabaseBackend, "RUNNING", None, None),
        (task_finished, DatabaseBackend, "FAILED", "ValueError", ["raises_value_error"]),
    ]


@pytest.mark.django_db(transaction=True)
# Differs on purpose for KeyboardInterrupt: Django's immediate backend lets it out of
# enqueue() with nothing logged (assertNoLogs); a worker records and logs it as any failure.
@pytest.mark.parametrize("name", ["raises_value_error", "raises_keyboard_interrupt", "returns_a_function"])
def test_a_worker_logs_one_record_with_one_traceback_per_failed_task(one_attempt, logs, name):
    result = getattr(tasks, name).enqueue()
    Worker(burst=True).run()
    failed = [r for r in logs.records if r.levelno >= logging.ERROR or r.exc_info]
    assert len(failed) == 1 and failed[0].name == tasks_logger.name, [r.getMessage() for r in failed]
    assert result.id in failed[0].getMessage() and "state=FAILED" in failed[0].getMessage()
    assert frames_of(failed[0].exc_info[2]) == ([] if name == "returns_a_function" else [name])


@pytest.mark.django_db(transaction=True)
def test_a_retried_attempt_is_logged_by_the_worker_and_is_not_a_finish(logs):
    result = tasks.raises_value_error.enqueue()
    for _ in range(3):  # OPTIONS max_attempts
        Job.objects.filter(pk=result.id).update(
            run_at=datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
        )
        Worker(burst=True).run()
    failed = [r for r in logs.records if r.levelno >= logging.WARNING and r.exc_info]
    assert [(r.name, r.levelname) for r in failed] == [
        ("django_dbjobs", "WARNING"),
        ("django_dbjobs", "WARNING"),
        (tasks_logger.name, "ERROR"),
    ]
    assert all(frames_of(r.exc_info[2]) == ["raises_value_error"] for r in failed)
    assert run_and_refresh(result).attempts == 3


def test_a_successful_task_logs_no_none(logs):
    result = tasks.takes_anything.enqueue()
    run_and_refresh(result)
    task_lines = [record.getMessage() for record in logs.records if record.name == tasks_logger.name]
    assert task_lines and not [line for line in task_lines if "None" in line], task_lines


# Async


def test_async_enqueue_get_result_and_refresh():
    async def enqueue():
        return [await tasks.takes_anything.aenqueue(), await tasks.takes_anything_async.aenqueue()]

    async def results(ids):
        return [await task.aget_result(id) for task, id in zip(chosen, ids, strict=True)]

    chosen = [tasks.takes_anything, tasks.takes_anything_async]
    enqueued = async_to_sync(enqueue)()
    assert [r.status for r in enqueued] == [TaskResultStatus.READY] * 2
    assert [(r.task, r.args, r.kwargs) for r in enqueued] == [(task, [], {}) for task in chosen]
    testing.run_jobs()
    for result in enqueued:
        async_to_sync(result.arefresh)()
        assert (result.status, result.return_value, result.attempts) == ("SUCCESSFUL", None, 1)
        assert_finished_in_order(result)
    assert async_to_sync(results)([r.id for r in enqueued]) == enqueued
    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(tasks.answer.aget_result)("123")
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        async_to_sync(tasks.answer.aget_result)(enqueued[0].id)
    answer = async_to_sync(task_backends["default"].aenqueue)(tasks.answer, [], {})
    testing.run_jobs()
    async_to_sync(answer.arefresh)()
    assert answer.return_value == 42


def test_a_failed_async_task_has_the_traceback_of_its_own_code(one_attempt):
    result = run_and_refresh(tasks.async_uses_orm_directly.enqueue())
    assert result.status == TaskResultStatus.FAILED
    stored = result.errors[0].traceback
    assert stored.splitlines()[1].endswith("in async_uses_orm_directly"), stored  # not the event loop's
    assert PACKAGE_DIR not in stored and "asgiref" not in stored, stored
