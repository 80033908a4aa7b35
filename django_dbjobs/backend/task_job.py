"""DatabaseTask (the task class, with job options) and TaskJob (a registered job that runs a Task)."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ..models import Job, JobStatus
from ..registry.registered import JobOptions, RegisteredJob
from ..signals import send
from .compat import Task, task_finished, task_started
from .results import task_result
from .task_context import JobTaskContext

if TYPE_CHECKING:
    from . import DatabaseBackend

#: Keys of the backend's OPTIONS, and of the extra @task() arguments (Django 6.1+).
OPTIONS = ("max_attempts", "backoff", "timeout", "concurrency_limit", "interruptible")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DatabaseTask(Task):
    """A Task with the job options Django 6.1 lets ``@task(...)`` pass: None means the backend's."""

    max_attempts: int | None = None
    backoff: float | None = None
    #: Seconds a run may take before it is interrupted (see the worker docs).
    timeout: float | None = None
    #: A key (or a function of the task's arguments returning one): at most one READY or
    #: RUNNING run of this task per key; enqueueing another returns that run's result.
    unique_key: str | Callable[..., str] | None = None
    #: A template (``"sync:{account_id}"``) or a function of the task's arguments: at most
    #: `concurrency_limit` runs of one key at once (docs/flow-control.rst).
    concurrency_key: str | Callable[..., str] | None = None
    concurrency_limit: int | None = None
    #: False: a cancel request only sets ``current_job().cancel_requested``.
    interruptible: bool | None = None


class TaskJob(RegisteredJob):
    """A registered job that runs a Task: its context, its signals, its async function."""

    finished_logs_failure = True  # Django's receiver of task_finished logs it, as for its own backends

    def __init__(self, task: Task, backend: DatabaseBackend):
        max_attempts = getattr(task, "max_attempts", None) or backend.options.get("max_attempts")
        backoff = getattr(task, "backoff", None)
        if backoff is None:
            backoff = backend.options.get("backoff")
        timeout = getattr(task, "timeout", None) or backend.options.get("timeout")
        limit = getattr(task, "concurrency_limit", None)
        interruptible = getattr(task, "interruptible", None)
        if interruptible is None:
            interruptible = backend.options.get("interruptible", True)
        options = JobOptions(
            max_attempts=max_attempts,
            backoff=backoff,
            timeout=timeout,
            concurrency_key=getattr(task, "concurrency_key", None),
            concurrency_limit=limit,
            interruptible=interruptible,
        )
        super().__init__(task.func, task.module_path, options)
        #: OPTIONS["concurrency_limit"]: the limit of a task given a key without one.
        self.default_concurrency_limit = backend.options.get("concurrency_limit")
        self.task = task
        self.backend = backend

    def check_arguments(self, args, kwargs) -> None:
        if self.task.takes_context:
            args = (None, *args)  # the TaskContext the worker passes first
        super().check_arguments(args, kwargs)

    def run(self, job: Job) -> Any:
        result = task_result(job, self.task, self.backend.alias)
        send(task_started, sender=type(self.backend), task_result=result)
        args = (JobTaskContext(task_result=result), *job.args) if self.task.takes_context else job.args
        return self.task.func(*args, **job.kwargs)  # a coroutine for an async task: see RegisteredJob.run()

    def finished(self, job: Job, status: str, failure: BaseException | None) -> None:
        if status not in (JobStatus.SUCCESSFUL, JobStatus.FAILED):
            return  # a failed attempt that will be retried: the task has not finished
        deferred = job.get_deferred_fields()
        if deferred:  # the sweep reads only what recovery needs
            job.refresh_from_db(fields=list(deferred))
        if not isinstance(job.finished_at, datetime.datetime):  # stamped by the database clock in SQL
            job.finished_at = timezone.now()
        result = task_result(job, self.task, self.backend.alias)
        if failure is None:
            send(task_finished, sender=type(self.backend), task_result=result)
            return
        # Sent inside an exception handler, as Django's backends send it: its logging receiver
        # reads the traceback from sys.exc_info().
        traceback, context = failure.__traceback__, failure.__context__
        try:
            raise failure
        except BaseException:  # noqa: BLE001
            # The raise put this frame on top of the job's traceback (and may have chained an
            # exception being handled); put back what the job raised. sys.exc_info() reads the
            # exception's own traceback (Python 3.11+).
            failure.__traceback__, failure.__context__ = traceback, context
            send(task_finished, sender=type(self.backend), task_result=result)
