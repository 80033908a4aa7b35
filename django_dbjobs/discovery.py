"""Which modules a worker imports to find jobs, and what to say about a job defined elsewhere.

A worker knows only the jobs registered by the modules it imports at start
(registry.autodiscover()): each installed app's ``jobs`` and ``tasks`` modules and
DBJOBS_JOB_MODULES. A ``@job`` in any other module (``shop/helpers.py``, imported by a
view) is registered in the web process, so enqueue() accepts it, but every worker hands
its jobs back until DBJOBS_UNKNOWN_JOB_GRACE dead-letters them. Saying so at enqueue,
in a system check and in the worker's log is what makes that mistake visible.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from types import ModuleType

from django.apps import apps

from . import registry
from .conf import settings
from .exceptions import UnimportedJobWarning

logger = logging.getLogger("django_dbjobs")

#: Names enqueue() has already looked at: the warning is given once per job name.
_looked_at: set[str] = set()
_lock = threading.Lock()


def imported_by_workers(registered: registry.JobFunction) -> bool:
    """Whether a worker would know `registered`: workers import its module, or a module that holds it."""
    module = registered.func.__module__
    roots = [f"{app.name}.{name}" for app in apps.get_app_configs() for name in registry.AUTODISCOVER_MODULES]
    roots += settings.JOB_MODULES
    if any(module == root or module.startswith(root + ".") for root in roots):
        return True
    return _held_by_a_worker_module(registered)


def _held_by_a_worker_module(registered: registry.JobFunction) -> bool:
    """Whether a module workers import holds the job, its task or its module: it imports them.

    ``from .helpers import send_receipt`` in ``shop/jobs.py`` registers the job in every
    worker although it is defined in ``shop.helpers``.
    """
    try:
        registry.discovered()  # imports the modules workers import, once per process
    except Exception:  # noqa: BLE001 - a broken job module is reported by the worker and the admin
        return False
    module = registered.func.__module__
    for name in registry.job_modules():
        namespace = getattr(sys.modules.get(name), "__dict__", {})
        for value in namespace.values():
            if value is registered or getattr(value, "func", None) is registered.func:
                return True
            if isinstance(value, ModuleType) and value.__name__ == module:
                return True
    return False


def unimported_message(registered: registry.JobFunction) -> str:
    """What is wrong with a job defined outside the modules workers import, and the two fixes."""
    module = registered.func.__module__
    return (
        f"Job {registered.name} is defined in {module}, which workers do not import: they will hand "
        f"its jobs back as unknown and dead-letter them {settings.UNKNOWN_JOB_GRACE:g} s after enqueue "
        f"(DBJOBS_UNKNOWN_JOB_GRACE). {modules_sentence()} Move the job to a 'jobs' or 'tasks' module "
        f"of an installed app, or add {module!r} to DBJOBS_JOB_MODULES."
    )


def modules_sentence() -> str:
    """'Workers import shop.jobs and billing.tasks.', or that they import none."""
    found = registry.job_modules()
    if not found:
        return "Workers import no job module (no installed app has a jobs or tasks module)."
    listed = ", ".join(found[:-1]) + f" and {found[-1]}" if len(found) > 1 else found[0]
    return f"Workers import {listed}."


def warn_if_unimported(registered: registry.JobFunction) -> None:
    """Warn once per job name (a warning and a log line) if no worker would know this job."""
    if registered.name in _looked_at:
        return
    with _lock:
        if registered.name in _looked_at:
            return
        _looked_at.add(registered.name)
    if imported_by_workers(registered):
        return
    message = unimported_message(registered)
    logger.warning(message)
    filename, lineno, module = _caller()
    warnings.warn_explicit(message, UnimportedJobWarning, filename, lineno, module=module)


def forget() -> None:
    """Look at every job again on its next enqueue (the settings changed)."""
    _looked_at.clear()


settings.on_reload(forget)

_PACKAGES = tuple(
    os.path.dirname(module.__file__) + os.sep
    for module in (sys.modules["django_dbjobs"], sys.modules["django"], sys.modules.get("asgiref"))
    if module is not None and getattr(module, "__file__", None)
)


def _caller() -> tuple[str, int, str]:
    """The file, line and module of the first caller outside django_dbjobs, Django and asgiref."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGES):
        frame = frame.f_back
    if frame is None:
        return "<unknown>", 0, "django_dbjobs"
    return frame.f_code.co_filename, frame.f_lineno, frame.f_globals.get("__name__", "")
