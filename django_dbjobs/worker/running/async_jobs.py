"""Running ``async def`` jobs: each on an event loop of its own, cancelled if its worker gives it up.

``async_to_sync`` runs the coroutine on a loop in a helper thread while the job thread
waits and serves the coroutine's ``sync_to_async`` calls (Django's async-safety rules:
the ORM runs on the job thread, with its connection). Python waits for that helper
thread at exit, so a coroutine still running when the worker stops (its job released
at the end of the grace, or at a second signal) would keep the process alive and run on
beside the job's next attempt: the worker cancels them instead (cancel_all()).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

from asgiref.sync import async_to_sync

_running: dict[object, tuple[asyncio.AbstractEventLoop, asyncio.Task]] = {}
_lock = threading.Lock()


def call(registered, job) -> Any:
    """Call `registered` (a RegisteredJob) for `job` on this job thread; return its value.

    An ``async def`` job's coroutine runs to completion here, on a loop of its own.
    """
    result = registered.run(job)
    return run(result, key=job.pk) if registered.is_async else result


def run(coroutine: Coroutine, key: object) -> Any:
    """Run `coroutine` (an async job's, not started yet) to completion from a job thread."""

    async def tracked():
        task = asyncio.current_task()
        with _lock:
            _running[key] = (task.get_loop(), task)
        try:
            return await coroutine
        finally:
            with _lock:
                _running.pop(key, None)

    try:
        return async_to_sync(tracked)()
    finally:
        coroutine.close()  # never awaited if async_to_sync refused to start (no warning); else a no-op


def cancel(key: object) -> bool:
    """Cancel the async job running under `key` (its timeout); False if it is not running."""
    with _lock:
        running = _running.get(key)
    if running is None:
        return False
    loop, task = running
    loop.call_soon_threadsafe(task.cancel)
    return True


def cancel_all() -> int:
    """Cancel every async job still running in this process; return how many."""
    with _lock:
        running = list(_running.values())
    for loop, task in running:
        loop.call_soon_threadsafe(task.cancel)
    return len(running)
