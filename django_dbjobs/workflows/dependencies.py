"""after(): every job enqueued in the block waits for the given jobs (``django.tasks`` too)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..enqueuing.workflow_options import open_after, runs_on_failure, upstream_ids


@contextmanager
def after(*jobs: Any, on_failure: str = "cancel") -> Iterator[None]:
    """Make the jobs enqueued in this block wait until `jobs` (jobs, task results, or ids)
    have all succeeded; with ``on_failure="run"``, until they have finished.

    The same as ``enqueue(..., after=[...], after_failure=...)``, for code that does not
    call enqueue() itself: ``my_task.enqueue()`` of ``django.tasks``.
    """
    token = open_after.set((upstream_ids(list(jobs)), runs_on_failure(on_failure)))
    try:
        yield
    finally:
        open_after.reset(token)
