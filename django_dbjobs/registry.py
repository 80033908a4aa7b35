"""The @job decorator and the registry of functions workers may run.

A worker only runs a row whose name is in this registry (DESIGN.md promise 11); it
never imports or calls whatever dotted path a row happens to hold.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import autodiscover_modules

from . import async_jobs
from .exceptions import InvalidJob, InvalidJobArguments, UnknownJob

logger = logging.getLogger("django_dbjobs")

#: Module names the registry imports from every installed app, as the admin does.
AUTODISCOVER_MODULES = ("jobs", "tasks")

_registry: dict[str, JobFunction] = {}
_discovered = False
_lock = threading.Lock()


@dataclass(frozen=True)
class JobOptions:
    """Defaults a registered job brings to enqueue(); None means the setting's default."""

    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    backoff: float | None = None
    #: Seconds a run may take before it is interrupted (timeouts.py); None: DBJOBS_DEFAULT_TIMEOUT.
    timeout: float | None = None


class JobFunction:
    """A registered job: call it to run it now, or `.enqueue(...)` to run it later."""

    #: Whether finished() has a dead-lettered attempt logged with its traceback (a Task's,
    #: by Django's task_finished receiver), so that the worker does not log it a second time.
    finished_logs_failure = False

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
        """Run the function for a claimed job, in the worker's job thread; return its value.

        An ``async def`` job runs to completion on an event loop of its own; code in it
        that calls ``sync_to_async`` comes back to this thread and its connection.
        """
        if self.is_async:
            return async_jobs.run(self.func, job.args, job.kwargs, key=job.pk)
        return self.func(*job.args, **job.kwargs)

    def finished(self, job, status: str, failure: BaseException | None) -> None:
        """Called in the worker after an attempt's outcome is stored (a hook for Tasks)."""

    @functools.cached_property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    def __repr__(self) -> str:
        return f"<JobFunction {self.name}>"

    def enqueue(self, *args: Any, **options: Any):
        """Enqueue this job; see django_dbjobs.enqueue() for the options."""
        from .enqueuing import enqueue

        return enqueue(self, *args, **options)

    def enqueue_many(self, arguments, **options: Any):
        """Enqueue this job once per tuple of positional arguments; see django_dbjobs.enqueue_many()."""
        from .enqueuing import enqueue_many

        return enqueue_many(self, arguments, **options)

    async def aenqueue(self, *args: Any, **options: Any):
        """Enqueue this job from async code; see django_dbjobs.aenqueue()."""
        from .enqueuing import aenqueue

        return await aenqueue(self, *args, **options)


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


def job(
    func: Callable | None = None,
    *,
    name: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    backoff: float | None = None,
    timeout: float | None = None,
):
    """Register a module-level function as a job, with default enqueue options.

    Use as ``@job`` or ``@job(queue="emails", max_attempts=5, timeout=60)``. The job's name
    is its dotted path (``module.function``) unless ``name`` is given.
    """
    if timeout is not None and not (
        isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0
    ):
        raise InvalidJob(f"timeout must be a number of seconds above 0, not {timeout!r}.")
    options = JobOptions(
        queue=queue, priority=priority, max_attempts=max_attempts, backoff=backoff, timeout=timeout
    )

    def register(f: Callable) -> JobFunction:
        if isinstance(f, JobFunction):
            raise InvalidJob(f"{f.name} is already registered as a job.")
        if not callable(f):
            raise InvalidJob(f"@job needs a function, not {f!r}.")
        qualname = getattr(f, "__qualname__", "")
        if name is None and ("<" in qualname or "." in qualname):
            raise InvalidJob(
                f"@job needs a module-level function; {qualname!r} is nested, so a worker "
                "could not find it. Move it to module level or pass name=."
            )
        return add(JobFunction(f, name or f"{f.__module__}.{qualname}", options))

    if func is not None:
        return register(func)
    return register


def add(registered: JobFunction) -> JobFunction:
    """Put a job in the registry under its name, replacing an earlier definition; return it."""
    with _lock:
        existing = _registry.get(registered.name)
        if existing is not None and existing.func is not registered.func:
            # Re-importing a module (autoreload, tests) registers a new function
            # object under the same name; the latest definition wins.
            logger.debug("Job re-registered name=%s", registered.name)
        _registry[registered.name] = registered
    return registered


def lookup(name: str) -> JobFunction | None:
    """The registered job called `name`, or None; never imports anything."""
    return _registry.get(name)


def autodiscover() -> None:
    """Import the jobs and tasks modules of installed apps, and DBJOBS_JOB_MODULES."""
    global _discovered
    from .conf import settings

    autodiscover_modules(*AUTODISCOVER_MODULES)
    for module in settings.JOB_MODULES:
        importlib.import_module(module)
    _discovered = True


def get(name: str) -> JobFunction:
    """Return the registered job called `name`, or raise UnknownJob."""
    found = _registry.get(name)
    if found is None and not _discovered:
        autodiscover()
        found = _registry.get(name)
    if found is None:
        raise UnknownJob(
            f"{name!r} is not a registered job. Decorate it with @django_dbjobs.job in a "
            "'jobs' or 'tasks' module of an installed app, or list its module in "
            "DBJOBS_JOB_MODULES."
        )
    return found


def resolve(target: JobFunction | Callable | str) -> JobFunction:
    """Return the registered job for a JobFunction, a registered function or a name."""
    if isinstance(target, JobFunction):
        return target
    if isinstance(target, str):
        return get(target)
    if callable(target):
        name = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', '')}"
        found = _registry.get(name)
        if found is not None and found.func is target:
            return found
        raise UnknownJob(f"{name!r} is not a registered job. Decorate it with @django_dbjobs.job.")
    raise UnknownJob(f"Expected a job function or its dotted name, not {target!r}.")


def discovered() -> dict[str, JobFunction]:
    """Every registered job, by name, after importing the job modules once (web processes)."""
    if not _discovered:
        autodiscover()
    return registered()


def registered() -> dict[str, JobFunction]:
    """Return a snapshot of every registered job, by name."""
    return dict(_registry)
