"""The @job decorator and the registry of functions workers may run.

A worker only runs a row whose name is in this registry (DESIGN.md promise 11); it
never imports or calls whatever dotted path a row happens to hold.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable

from django.apps import apps
from django.utils.module_loading import autodiscover_modules, module_has_submodule

from .exceptions import InvalidJob, UnknownJob
from .job_function import JobFunction, JobOptions

__all__ = [
    "AUTODISCOVER_MODULES",
    "JobFunction",
    "JobOptions",
    "add",
    "autodiscover",
    "discovered",
    "discovered_with_errors",
    "get",
    "job",
    "job_modules",
    "lookup",
    "registered",
    "resolve",
]

logger = logging.getLogger("django_dbjobs")

#: Module names the registry imports from every installed app, as the admin does.
AUTODISCOVER_MODULES = ("jobs", "tasks")

_registry: dict[str, JobFunction] = {}
_discovered = False
_lock = threading.Lock()


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


#: The job modules that failed to import in discovered_with_errors(), by name; None: not tried yet.
_import_errors: dict[str, str] | None = None
_import_errors_lock = threading.RLock()  # a job module may itself ask for the registered jobs


def job_modules() -> list[str]:
    """The modules a worker imports to find jobs: apps' jobs and tasks modules, then DBJOBS_JOB_MODULES."""
    from .conf import settings

    found = [
        f"{config.name}.{name}"
        for config in apps.get_app_configs()
        for name in AUTODISCOVER_MODULES
        if module_has_submodule(config.module, name)
    ]
    return [*found, *(module for module in settings.JOB_MODULES if module not in found)]


def discovered_with_errors() -> tuple[dict[str, JobFunction], dict[str, str]]:
    """Every registered job, and the error of each job module that failed to import, by module.

    For pages that must stay up while a module is broken (the admin): each module is
    imported once per process and its failure logged once, with its traceback. A worker
    calls autodiscover() instead, which raises: it refuses to start on such a module.
    """
    global _discovered, _import_errors

    with _import_errors_lock:
        if _import_errors is None:
            errors = {}
            for module in job_modules():
                try:
                    importlib.import_module(module)
                except Exception as exc:
                    logger.exception("Job module failed to import module=%s", module)
                    errors[module] = f"{type(exc).__name__}: {exc}"
            _import_errors = errors
            _discovered = _discovered or not errors
    return registered(), dict(_import_errors)


def registered() -> dict[str, JobFunction]:
    """Return a snapshot of every registered job, by name."""
    return dict(_registry)
