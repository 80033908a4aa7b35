"""DatabaseBackend: Django's Tasks framework (``django.tasks``) on the job table.

``TASKS = {"default": {"BACKEND": "django_dbjobs.backend.DatabaseBackend"}}``. A
``@task`` bound to this backend is registered as a job under its module path when it is
defined, so a worker runs it like any ``@job`` and runs nothing else (DESIGN.md promise
11). ``compat`` is the only module importing ``django.tasks`` (or the Django 5.2
backport); ``results.task_result()`` is the only Job-to-TaskResult mapping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.conf import settings as django_settings
from django.core import checks
from django.utils.module_loading import import_string

from .. import registry
from ..enqueuing import api as enqueuing
from ..enqueuing import validation
from ..enqueuing.spec import JobSpec
from ..exceptions import InvalidJob
from ..flow import keys
from ..models import Job
from ..observability import producing
from ..registry.registered import RegisteredJob
from .compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)
from .results import copy_task, task_result
from .task_context import JobTaskContext
from .task_job import OPTIONS, DatabaseTask, TaskJob

logger = logging.getLogger("django_dbjobs")

__all__ = [
    "DatabaseBackend",
    "DatabaseTask",
    "InvalidTask",
    "JobTaskContext",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "task_enqueued",
    "task_finished",
    "task_result",
    "task_started",
]


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
            timeout = getattr(task, "timeout", None)
            if timeout is not None and not (_positive_number(timeout)):
                raise InvalidJob(f"timeout must be a number of seconds above 0, not {timeout!r}.")
            key = getattr(task, "unique_key", None)
            if key is not None and not (callable(key) or isinstance(key, str)):
                raise InvalidJob(f"unique_key must be a string or a function, not {key!r}.")
            concurrency_key = getattr(task, "concurrency_key", None)
            keys.check_spec(concurrency_key, getattr(task, "concurrency_limit", None))
            if isinstance(concurrency_key, str):
                keys.check_template(task.func, concurrency_key)
            interruptible = getattr(task, "interruptible", None)
            if interruptible is not None and not isinstance(interruptible, bool):
                raise InvalidJob(f"interruptible must be True or False, not {interruptible!r}.")
        except InvalidJob as exc:
            raise InvalidTask(str(exc)) from None
        existing = registry.lookup(task.module_path)
        if isinstance(existing, TaskJob) and existing.backend.alias != self.alias:
            raise InvalidTask(
                f"{task.module_path} is bound to TASKS[{existing.backend.alias!r}]; one DatabaseBackend "
                f"alias serves all tasks (TASKS[{self.alias!r}] is another)."
            )
        if not (
            isinstance(existing, TaskJob)
            and existing.func is task.func
            and _same_backend(existing.backend, self)
            and _same_options(existing.task, task)
        ):
            registry.add(TaskJob(copy_task(task, run_after=None), self))

    def enqueue(self, task: Task, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> TaskResult:
        """Write the task as a job on the caller's connection; workers wake when it commits."""
        self.validate_task(task)
        _check_importable(task)
        registered = registry.lookup(task.module_path)
        if registered is None:  # validate_task() registers it: only a concurrent unregister
            raise InvalidTask(f"{task.module_path} is not registered as a task.")
        key = getattr(task, "unique_key", None)
        if callable(key):
            registered.check_arguments(args, kwargs)  # before the key function sees them
            key = key(*args, **kwargs)
        spec = JobSpec(
            queue=task.queue_name,
            priority=task.priority,
            run_at=task.run_after,
            unique_key=key,
            using=self.using,
        )
        job, created = producing.send(
            lambda trace: _store(registered, args, kwargs, spec.traced(trace)), producing.first
        )
        result = task_result(job, task, self.alias)
        if created:  # a held unique key returns the holder's result: nothing was enqueued
            task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        """The TaskResult of the job with this id; TaskResultDoesNotExist if there is none."""
        job = Job.objects.using(self.using).filter(pk=str(result_id)).first() if result_id else None
        registered = None
        if job is not None:
            registered = registry.lookup(job.name) or registry.discovered().get(job.name)
        if job is None or not isinstance(registered, TaskJob) or registered.backend.alias != self.alias:
            raise TaskResultDoesNotExist(f"No task result with id {result_id!r}.")
        return task_result(job, registered.task, self.alias)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
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
        ours = [alias for alias, params in django_settings.TASKS.items() if _is_ours(params.get("BACKEND"))]
        if len(ours) > 1 and self.alias != ours[0]:
            errors.append(
                checks.Error(
                    f"TASKS[{self.alias!r}] and TASKS[{ours[0]!r}] both use DatabaseBackend; one alias "
                    "serves every task (a task's row does not record its alias).",
                    hint="Keep one DatabaseBackend alias; split the work with queues (run_jobs --queues).",
                    id="dbjobs.E026",
                )
            )
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
        timeout = self.options.get("timeout")
        if timeout is not None and not _positive_number(timeout):
            errors.append(f"OPTIONS['timeout'] must be a number of seconds above 0, not {timeout!r}")
        limit = self.options.get("concurrency_limit")
        if limit is not None:
            try:
                keys.check_limit(limit)
            except InvalidJob as exc:
                errors.append(f"OPTIONS['concurrency_limit']: {str(exc).rstrip('.')}")
        interruptible = self.options.get("interruptible")
        if interruptible is not None and not isinstance(interruptible, bool):
            errors.append(f"OPTIONS['interruptible'] must be True or False, not {interruptible!r}")
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


_importable: set[Callable] = set()


def _store(
    registered: RegisteredJob, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any], spec: JobSpec
) -> tuple[Job, bool]:
    """Store the task's job as `spec` asks; return it (or its unique key's holder) and if it is new."""
    fields, using = enqueuing.job_fields(registered, args, kwargs, spec)
    # In a ``batch()`` block it joins the batch; in an ``after()`` block, it waits.
    return enqueuing.store_new(fields, using, spec)


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


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _is_ours(path: object) -> bool:
    try:
        backend = import_string(path) if isinstance(path, str) else None
    except ImportError:
        return False
    return isinstance(backend, type) and issubclass(backend, DatabaseBackend)


def _same_backend(a: BaseTaskBackend, b: BaseTaskBackend) -> bool:
    # Django makes a backend instance per thread: the same configuration is the same backend.
    return type(a) is type(b) and a.alias == b.alias and a.options == b.options


def _same_options(a: Task, b: Task) -> bool:
    return a.takes_context == b.takes_context and all(
        getattr(a, name, None) == getattr(b, name, None)
        for name in (*OPTIONS, "unique_key", "concurrency_key")
    )
