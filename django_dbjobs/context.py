"""current_job(): the Job a worker thread is running, for code inside the job."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import Job

_current: contextvars.ContextVar[Job | None] = contextvars.ContextVar("dbjobs_job", default=None)


def current_job() -> Job | None:
    """Return the Job being run in this thread, or None outside a worker."""
    return _current.get()


@contextlib.contextmanager
def running(job: Job) -> Iterator[None]:
    token = _current.set(job)
    job._running = True  # progress() and checkpoint() are for the job's own code (models/long_work.py)
    try:
        yield
    finally:
        job._running = False
        _current.reset(token)
