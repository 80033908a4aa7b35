"""DatabaseBackend: Django's Tasks framework (``django.tasks``) on the job table.

The only module that imports ``django.tasks`` (or, on Django 5.2, the ``django-tasks``
backport). A ``@task`` bound to this backend is registered as a job under its module
path when it is defined, so a worker runs it like any ``@job`` and runs nothing else
(DESIGN.md promise 11). The Job-to-TaskResult mapping is ``task_result()``, here only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.core import checks
from django.utils.module_loading import import_string

from . import enqueuing, registry, validation
from .exceptions import InvalidJob
from .models import Job, JobStatus
from .registry import JobFunction, JobOptions
from .signals import send

try:
    from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2: the django-tasks backport, whose names differ
    from django_tasks import TaskContext, TaskResult, TaskResultStatus
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

__all__ = ["DatabaseBackend", "DatabaseTask", "task_result"]

#: Keys of the backend's OPTIONS, and of the extra @task() arguments (Django 6.1+).
OPTIONS = ("max_attempts", "backoff")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseTask(Task):
    """A Task with the job options Django 6.1 lets ``@task(...)`` pass: None means the backend's."""

    max_attempts: int | None = None
    backoff: float | None = None
    #: A key (or a function of the task's arguments returning one): at most one READY or
    #: RUNNING run of this task per key; enqueueing another returns that run's result.
    unique_key: str | Callable[..., str] | None = None


class TaskJob(JobFunction):
    """A registered job that runs a Task: its context, its signals, its async function."""

    def __init__(self, task: Task, backend: DatabaseBackend):
        max_attempts = getattr(task, "max_attempts", None) or backend.options.get("max_attempts")
        backoff = getattr(task, "backoff", None)
        if backoff is None:
            backoff = backend.options.get("backoff")
        super().__init__(task.func, task.module_path, JobOptions(max_attempts=max_attempts, backoff=backoff))
        self.task = task
        self.backend = backend

    def check_arguments(self, args, kwargs) -> None:
        if self.task.takes_context:
            args = (None, *args)  # the TaskContext the worker passes first
        super().check_arguments(args, kwargs)

    def run(self, job: Job) -> Any:
        result = task_result(job, self.task, self.backend.alias)
        send(task_started, sender=type(self.backend), task_result=result)
        if self.task.takes_context:
            return self.task.call(TaskContext(task_result=result), *job.args, **job.kwargs)
        return self.task.call(*job.args, **job.kwargs)

    def finished(self, job: Job, status: str, failure: BaseException | None) -> None:
        if status not in (JobStatus.SUCCESSFUL, JobStatus.FAILED):
            return  # a failed attempt that will be retried: the task has not finished
        result = task_result(job, self.task, self.backend.alias)
        if failure is None:
            send(task_finished, sender=type(self.backend), task_result=result)
            return
        try:  # inside an exception handler, as Django's backends send it: logging gets the traceback
            raise failure
        except BaseException:  # noqa: BLE001
            send(task_finished, sender=type(self.backend), task_result=result)


class DatabaseBackend(BaseTaskBackend):
    """Store tasks as jobs: transactional enqueue, priorities, deferral, results, retries, dead letters."""

    task_class = DatabaseTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict):
        super().__init__(alias, params)
        self.using = self.options.get("database")

    def validate_task(self, task: Task) -> None:
        """Django's rules, then ours (queue names, job options); register the task for workers."""
        super().validate_task(task)
        try:
            validation.queue(task.queue_name)
            if getattr(task, "max_attempts", None) is not None:
                validation.max_attempts(task.max_attempts)
            backoff = getattr(task, "backoff", None)
            if backoff is not None and not (isinstance(backoff, int | float) and backoff >= 0):
                raise InvalidJob(f"backoff must be a number of seconds, 0 or more, not {backoff!r}.")
            key = getattr(task, "unique_key", None)
            if key is not None and not (callable(key) or isinstance(key, str)):
                raise InvalidJob(f"unique_key must be a string or a function, not {key!r}.")
        except InvalidJob as exc:
            raise InvalidTask(str(exc)) from None
        existing = registry.lookup(task.module_path)
        if not (
            isinstance(existing, TaskJob)
            and existing.func is task.func
            and _same_backend(existing.backend, self)
            and _same_options(existing.task, task)
        ):
            registry.add(TaskJob(_copy(task, run_after=None), self))

    def enqueue(self, task: Task, args, kwargs) -> TaskResult:
        """Write the task as a job on the caller's connection; workers wake when it commits."""
        self.validate_task(task)
        _check_importable(task)
        registered = registry.lookup(task.module_path)
        key = getattr(task, "unique_key", None)
        if callable(key):
            key = key(*args, **kwargs)
        job = enqueuing.enqueue(
            registered,
            *args,
            kwargs=dict(kwargs),
            queue=task.queue_name,
            priority=task.priority,
            run_at=task.run_after,
            unique_key=key,
            using=self.using,
        )
        result = task_result(job, task, self.alias)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id) -> TaskResult:
        """The TaskResult of the job with this id; TaskResultDoesNotExist if there is none."""
        job = Job.objects.using(self.using).filter(pk=str(result_id)).first() if result_id else None
        registered = None
        if job is not None:
            registered = registry.lookup(job.name) or registry.discovered().get(job.name)
        if not isinstance(registered, TaskJob) or registered.backend.alias != self.alias:
            raise TaskResultDoesNotExist(f"No task result with id {result_id!r}.")
        return task_result(job, registered.task, self.alias)

    def check(self, **kwargs) -> list[checks.CheckMessage]:
        """Configuration problems: the app not installed, bad queue names or OPTIONS."""
        errors = []
        if not apps.is_installed("django_dbjobs"):
            errors.append(
                checks.Error(
                    f"TASKS[{self.alias!r}] uses {type(self).__name__}, but django_dbjobs is not in "
                    "INSTALLED_APPS.",
                    hint="Add 'django_dbjobs' to INSTALLED_APPS and run manage.py migrate.",
                    id="dbjobs.E022",
                )
            )
        for name in sorted(self.queues):
            try:
                validation.queue(name)
            except InvalidJob as exc:
                errors.append(checks.Error(f"TASKS[{self.alias!r}]['QUEUES']: {exc}", id="dbjobs.E023"))
        errors.extend(self._option_errors())
        return errors

    def _option_errors(self) -> list[checks.CheckMessage]:
        errors = []
        unknown = sorted(set(self.options) - {*OPTIONS, "database"})
        if unknown:
            errors.append(
                f"unknown OPTIONS {', '.join(map(repr, unknown))}; known: {', '.join(OPTIONS)}, database"
            )
        attempts = self.options.get("max_attempts")
        if attempts is not None and not (
            isinstance(attempts, int) and not isinstance(attempts, bool) and attempts >= 1
        ):
            errors.append(f"OPTIONS['max_attempts'] must be a positive integer, not {attempts!r}")
        backoff = self.options.get("backoff")
        if backoff is not None and not (isinstance(backoff, int | float) and backoff >= 0):
            errors.append(f"OPTIONS['backoff'] must be a number of seconds, 0 or more, not {backoff!r}")
        database = self.options.get("database")
        if database is not None and not isinstance(database, str):
            errors.append(f"OPTIONS['database'] must be a database alias, not {database!r}")
        return [
            checks.Error(
                f"TASKS[{self.alias!r}]: {problem}.",
                hint="For example: 'OPTIONS': {'max_attempts': 5, 'backoff': 2.0}.",
                id="dbjobs.E024",
            )
            for problem in errors
        ]


def task_result(job: Job, task: Task, alias: str) -> TaskResult:
    """The TaskResult of a job row: the one place a Job becomes a TaskResult."""
    status = TaskResultStatus(job.status)
    result = TaskResult(
        task=_copy(task, priority=job.priority, queue_name=job.queue) if _differs(task, job) else task,
        id=job.pk,
        status=status,
        enqueued_at=_datetime(job.enqueued_at),
        started_at=job.started_at,
        finished_at=_datetime(job.finished_at),
        last_attempted_at=job.last_attempted_at,
        args=list(job.args),
        kwargs=dict(job.kwargs),
        backend=alias,
        errors=[
            TaskError(
                exception_class_path=error.get("exception_class_path", ""),
                traceback=error.get("traceback", ""),
            )
            for error in job.errors
        ],
        worker_ids=list(job.worker_ids),
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.return_value)
    return result


def _differs(task: Task, job: Job) -> bool:
    return task.priority != job.priority or task.queue_name != job.queue


def _datetime(value):
    """A datetime, or None for a column the database is still to fill in (an expression)."""
    return None if hasattr(value, "resolve_expression") else value


def _copy(task: Task, **changes: Any) -> Task:
    """The task with `changes`, without validating it again (``using()`` would, on every call)."""
    clone = object.__new__(type(task))
    for field in dataclasses.fields(task):
        object.__setattr__(clone, field.name, changes.get(field.name, getattr(task, field.name)))
    return clone


_importable: set[Callable] = set()


def _check_importable(task: Task) -> None:
    """Refuse a task a worker could not find by its module path (InvalidTask)."""
    if task.func in _importable:
        return
    try:
        found = import_string(task.module_path)
    except ImportError:
        found = None
    if not (isinstance(found, Task) and found.func is task.func):
        raise InvalidTask(
            f"{task.module_path} does not name this task, so a worker could not find it. "
            "Define tasks at module level with @task, under the function's own name."
        )
    _importable.add(task.func)


def _same_backend(a: BaseTaskBackend, b: BaseTaskBackend) -> bool:
    # Django makes a backend instance per thread: the same configuration is the same backend.
    return type(a) is type(b) and a.alias == b.alias and a.options == b.options


def _same_options(a: Task, b: Task) -> bool:
    return a.takes_context == b.takes_context and all(
        getattr(a, name, None) == getattr(b, name, None) for name in (*OPTIONS, "unique_key")
    )
