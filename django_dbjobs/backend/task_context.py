"""JobTaskContext: the TaskContext of ``takes_context=True`` tasks, with the job's long-work extras."""

from __future__ import annotations

from typing import Any

from ..context import current_job
from ..models import Job
from ..models.long_work import ProgressHandle
from .compat import TaskContext


class JobTaskContext(TaskContext):
    """Django's TaskContext (``task_result``, ``attempt``), and the Job that runs the task.

    ``context.progress(done, total, note)``, ``context.checkpoint(state)``,
    ``context.resume`` and ``context.stopping`` are the job's (models/long_work.py);
    ``context.job`` is the Job itself. Django's TaskContext is a frozen dataclass with
    slots: this adds no field, so it compares, prints and copies as Django's does.
    """

    __slots__ = ()

    @property
    def job(self) -> Job:
        """The Job running this task; only while it runs, on its thread (or its coroutine)."""
        job = current_job()
        if job is None or str(job.pk) != str(self.task_result.id):
            raise RuntimeError(
                "context.job is for the task's own code while it runs: the worker runs task "
                f"{self.task_result.id} elsewhere, or it has ended."
            )
        return job

    @property
    def progress(self) -> ProgressHandle:
        """Call it to report (``context.progress(40, total=100)``); read it for the newest report."""
        return self.job.progress

    def checkpoint(self, state: Any) -> bool:
        """Store `state` with the task's job: a later run of it reads it as ``context.resume``."""
        return self.job.checkpoint(state)

    async def acheckpoint(self, state: Any) -> bool:
        """checkpoint() from an ``async def`` task."""
        return await self.job.acheckpoint(state)

    @property
    def resume(self) -> Any:
        """The last checkpoint stored for this task's job (None: none), to carry on from."""
        return self.job.resume

    @property
    def stopping(self) -> bool:
        """Whether the worker was asked to stop (a deploy): store a checkpoint and raise ResumeLater."""
        return self.job.stopping
