"""The Job-to-TaskResult mapping: the one place a job row becomes a ``TaskResult``."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..models import Job
from .compat import Task, TaskError, TaskResult, TaskResultStatus


def task_result(job: Job, task: Task, alias: str) -> TaskResult:
    """The TaskResult of a job row: the one place a Job becomes a TaskResult."""
    status = TaskResultStatus(job.status)
    result = TaskResult(
        task=copy_task(task, priority=job.priority, queue_name=job.queue) if _differs(task, job) else task,
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


def copy_task(task: Task, **changes: Any) -> Task:
    """The task with `changes`, without validating it again (``using()`` would, on every call)."""
    clone = object.__new__(type(task))
    for field in dataclasses.fields(task):
        object.__setattr__(clone, field.name, changes.get(field.name, getattr(task, field.name)))
    return clone
