"""The registry of functions workers may run, and finding the modules that register them.

The ``@job`` decorator that fills it is in enqueuing/job_function.py.

A worker only runs a row whose name is in this registry (DESIGN.md promise 11); it
never imports or calls whatever dotted path a row happens to hold.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from django.apps import apps
from django.utils.module_loading import autodiscover_modules, module_has_submodule

from ..conf import settings
from ..exceptions import UnknownJob
from .registered import JobOptions, RegisteredJob

__all__ = [
    "AUTODISCOVER_MODULES",
    "JobOptions",
    "RegisteredJob",
    "add",
    "autodiscover",
    "discovered",
    "discovered_with_errors",
    "get",
    "job_modules",
    "lookup",
    "registered",
    "resolve",
]

logger = logging.getLogger("django_dbjobs")

#: Module names the registry imports from every installed app, as the admin does.
AUTODISCOVER_MODULES = ("jobs", "tasks")

_registry: dict[str, RegisteredJob] = {}
_discovered = False
_lock = threading.Lock()
_Registered = TypeVar("_Registered", bound=RegisteredJob)


def add(registered: _Registered) -> _Registered:
    """Put a job in the registry under its name, replacing an earlier definition; return it."""
    with _lock:
        existing = _registry.get(registered.name)
        if existing is not None and existing.func is not registered.func:
            # Re-importing a module (autoreload, tests) registers a new function
            # object under the same name; the latest definition wins.
            logger.debug("Job re-registered name=%s", registered.name)
        _registry[registered.name] = registered
    return registered


def lookup(name: str) -> RegisteredJob | None:
    """The registered job called `name`, or None; never imports anything."""
    return _registry.get(name)


def autodiscover() -> None:
    """Import the jobs and tasks modules of installed apps, and DBJOBS_JOB_MODULES."""
    global _discovered
    autodiscover_modules(*AUTODISCOVER_MODULES)
    for module in settings.JOB_MODULES:
        importlib.import_module(module)
    _discovered = True


def get(name: str) -> RegisteredJob:
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


def resolve(target: RegisteredJob | Callable | str) -> RegisteredJob:
    """Return the registered job for a RegisteredJob, a registered function or a name."""
    if isinstance(target, RegisteredJob):
        return target
    if isinstance(target, str):
        return get(target)
    path = getattr(target, "module_path", None)  # a django.tasks Task our backend registered
    if isinstance(path, str) and isinstance(_registry.get(path), RegisteredJob) and not callable(target):
        return _registry[path]
    if callable(target):
        name = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', '')}"
        found = _registry.get(name)
        if found is not None and found.func is target:
            return found
        raise UnknownJob(f"{name!r} is not a registered job. Decorate it with @django_dbjobs.job.")
    raise UnknownJob(f"Expected a job function or its dotted name, not {target!r}.")


def discovered() -> dict[str, RegisteredJob]:
    """Every registered job, by name, after importing the job modules once (web processes)."""
    if not _discovered:
        autodiscover()
    return registered()


#: The job modules that failed to import in discovered_with_errors(), by name; None: not tried yet.
_import_errors: dict[str, str] | None = None
_import_errors_lock = threading.RLock()  # a job module may itself ask for the registered jobs


def job_modules() -> list[str]:
    """The modules a worker imports to find jobs: apps' jobs and tasks modules, then DBJOBS_JOB_MODULES."""
    found = [
        f"{config.name}.{name}"
        for config in apps.get_app_configs()
        for name in AUTODISCOVER_MODULES
        if module_has_submodule(config.module, name)
    ]
    return [*found, *(module for module in settings.JOB_MODULES if module not in found)]


def discovered_with_errors() -> tuple[dict[str, RegisteredJob], dict[str, str]]:
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


def registered() -> dict[str, RegisteredJob]:
    """Return a snapshot of every registered job, by name."""
    return dict(_registry)
