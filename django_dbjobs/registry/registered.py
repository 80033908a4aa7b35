"""RegisteredJob: a function registered as a job, with its options; how a worker calls it.

The ``@job`` decorator and the ``.enqueue()`` methods users call are added above it,
in enqueuing/job_function.py (JobFunction); the Tasks backend has its own kind (TaskJob).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..exceptions import InvalidJobArguments


@dataclass(frozen=True)
class JobOptions:
    """Defaults a registered job brings to enqueue(); None means the setting's default."""

    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    backoff: float | None = None
    #: Seconds a run may take before it is interrupted (worker/running/deadlines.py); None: the default.
    timeout: float | None = None
    #: A template (``"sync:{account_id}"``) or a function of the arguments: its jobs share a
    #: concurrency key, of which at most `concurrency_limit` run at once (flow/keys.py).
    concurrency_key: str | Callable[..., str] | None = None
    concurrency_limit: int | None = None
    #: False: a cancel request only sets ``current_job().cancel_requested``; the job stops itself.
    interruptible: bool = True


class RegisteredJob:
    """A registered job: what a worker needs to know of it, and how it calls it."""

    #: Whether finished() has a dead-lettered attempt logged with its traceback (a Task's,
    #: by Django's task_finished receiver), so that the worker does not log it a second time.
    finished_logs_failure = False
    #: The limit of a job given a concurrency key without one (None: flow/keys.py's default).
    default_concurrency_limit: int | None = None

    @classmethod
    def dead_letter_log_level(cls, registered: RegisteredJob | None) -> int:
        """The level of the worker's own line for a dead letter: DEBUG where finished() logs it."""
        return logging.DEBUG if registered is not None and registered.finished_logs_failure else logging.ERROR

    def __init__(self, func: Callable, name: str, options: JobOptions):
        self.func = func
        self.name = name
        self.options = options
        functools.update_wrapper(self, func)
        self._fits = _arguments_checker(func)

    def check_arguments(self, args: tuple | list, kwargs: dict) -> None:
        """Raise InvalidJobArguments unless ``func(*args, **kwargs)`` fits the signature."""
        if self._fits is None or (not kwargs and self._fits(len(args))):
            return
        signature = inspect.signature(self.func)
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidJobArguments(f"The arguments do not fit {self.name}{signature}: {exc}.") from None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def run(self, job) -> Any:
        """Call the function for a claimed job, in the worker's job thread; return its value.

        An ``async def`` job returns its coroutine: the worker runs it to completion on
        an event loop of its own (worker/running/async_jobs.py), where a timeout can cancel it.
        """
        return self.func(*job.args, **job.kwargs)

    def finished(self, job, status: str, failure: BaseException | None) -> None:
        """Called in the worker after an attempt's outcome is stored (a hook for Tasks)."""

    @functools.cached_property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _arguments_checker(func: Callable) -> Callable[[int], bool] | None:
    """A quick test of a positional-only call's argument count; None if the signature is unknown.

    A count it accepts always binds; anything else goes through inspect's bind() for
    an exact message.
    """
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    lowest = most = 0
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            most += 1
            lowest += parameter.default is parameter.empty
        elif parameter.kind is parameter.VAR_POSITIONAL:
            most = 1 << 30
        elif parameter.kind is parameter.KEYWORD_ONLY and parameter.default is parameter.empty:
            return lambda count: False  # always needs a keyword: bind() decides
    return lambda count: lowest <= count <= most
