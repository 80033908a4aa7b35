"""Background jobs and cron schedules for Django, stored in your database.

Public API: ``job``, ``enqueue``, ``aenqueue``, ``prepare``, ``bulk_enqueue``,
``enqueue_many``, ``current_job``, ``resumable``, ``aresumable``, ``ResumeLater``,
``batch``, ``after``. Imported lazily so ``import django_dbjobs`` works before Django's
apps are ready.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The one place the version is written: pyproject.toml reads it ([tool.setuptools.dynamic]).
__version__ = "0.1.0.dev0"

_EXPORTS = {
    "job": "enqueuing",
    "JobFunction": "enqueuing",
    "enqueue": "enqueuing",
    "aenqueue": "enqueuing",
    "prepare": "enqueuing",
    "bulk_enqueue": "enqueuing",
    "enqueue_many": "enqueuing",
    "current_job": "context",
    "resumable": "long_jobs",
    "aresumable": "long_jobs",
    "ResumeLater": "exceptions",
    "batch": "workflows",
    "after": "workflows",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports on first use
    from .context import current_job as current_job
    from .enqueuing import JobFunction as JobFunction
    from .enqueuing import aenqueue as aenqueue
    from .enqueuing import bulk_enqueue as bulk_enqueue
    from .enqueuing import enqueue as enqueue
    from .enqueuing import enqueue_many as enqueue_many
    from .enqueuing import job as job
    from .enqueuing import prepare as prepare
    from .exceptions import ResumeLater as ResumeLater
    from .long_jobs import aresumable as aresumable
    from .long_jobs import resumable as resumable
    from .workflows import after as after
    from .workflows import batch as batch


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'django_dbjobs' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"django_dbjobs.{module}"), name)
