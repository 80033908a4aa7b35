"""Which modules a worker imports to find jobs, and what to say about a job defined elsewhere.

A worker knows only the jobs registered by the modules it imports at start: each
installed app's ``jobs`` and ``tasks`` modules and DBJOBS_JOB_MODULES (registry.
autodiscover()), the apps and their models, and what those import (startup_imports.py).
A ``@job`` in any other module (``shop/helpers.py``, imported by a view) is registered
in the web process, so enqueue() accepts it, but every worker hands its jobs back until
DBJOBS_UNKNOWN_JOB_GRACE dead-letters them. Saying so at enqueue, in a system check and in
the worker's log is what makes that mistake visible.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings

from .. import registry
from ..conf import settings
from ..exceptions import UnimportedJobWarning
from . import startup_imports

logger = logging.getLogger("django_dbjobs")

#: Names enqueue() has already looked at: the warning is given once per job name.
_looked_at: set[str] = set()
_lock = threading.Lock()


def imported_by_workers(registered: registry.RegisteredJob) -> bool:
    """Whether a worker would know `registered`: its module is one a worker imports as it starts."""
    module = registered.func.__module__
    if module in registry.job_modules():
        return True
    global _imported_at_start
    if _imported_at_start is None:
        _imported_at_start = startup_imports.imported_at_start()
    return module in _imported_at_start


#: startup_imports.imported_at_start(), read once per process (again when the settings change).
_imported_at_start: set[str] | None = None


#: The __name__ a function typed in ``manage.py shell`` gets: ``-c`` and piped input run in
#: the shell command's module, the plain console in none, IPython in __main__.
_SHELL_MODULES = (None, "__main__", "django.core.management.commands.shell")


def defined_in_shell(registered: registry.RegisteredJob) -> bool:
    """Whether the job was typed in a shell or exec'd: no module file holds it for a worker to import."""
    filename = getattr(getattr(registered.func, "__code__", None), "co_filename", "")
    return registered.func.__module__ in _SHELL_MODULES or filename.startswith("<")


def unimported_message(registered: registry.RegisteredJob) -> str:
    """What is wrong with a job defined outside the modules workers import, and the two fixes."""
    module = registered.func.__module__
    if defined_in_shell(registered):
        return (
            f"Job {registered.name} was defined in a shell (manage.py shell, or code run with exec), "
            "which no worker can import: they will hand its jobs back as unknown and dead-letter them "
            f"{settings.UNKNOWN_JOB_GRACE:g} s after enqueue (DBJOBS_UNKNOWN_JOB_GRACE). Define it in "
            "a 'jobs' module of an installed app (myapp/jobs.py), then import it in the shell: "
            f"from myapp.jobs import {registered.func.__name__}."
        )
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


def warn_if_unimported(registered: registry.RegisteredJob) -> None:
    """Warn once per job name (a warning and a log line) if no worker would know this job.

    Where warnings are errors (``-W error``), every enqueue of the job raises, not the
    first alone: the name is marked as looked at only once the warning was given.
    """
    if registered.name in _looked_at:
        return
    with _lock:
        known = imported_by_workers(registered)
    if not known:
        message = unimported_message(registered)
        logger.warning(message)
        filename, lineno, module = caller()
        warnings.warn_explicit(message, UnimportedJobWarning, filename, lineno, module=module)
    _looked_at.add(registered.name)


def forget() -> None:
    """Look at every job again on its next enqueue (the settings changed)."""
    global _imported_at_start
    _looked_at.clear()
    _imported_at_start = None


settings.on_reload(forget)

_PACKAGES = tuple(
    os.path.dirname(module.__file__) + os.sep
    for module in (sys.modules["django_dbjobs"], sys.modules["django"], sys.modules.get("asgiref"))
    if module is not None and getattr(module, "__file__", None)
)


def caller() -> tuple[str, int, str]:
    """The file, line and module of the first caller outside django_dbjobs, Django and asgiref."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGES):
        frame = frame.f_back
    if frame is None:
        return "<unknown>", 0, "django_dbjobs"
    return frame.f_code.co_filename, frame.f_lineno, frame.f_globals.get("__name__", "")
