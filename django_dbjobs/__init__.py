"""Background jobs and cron schedules for Django, stored in your database.

Public API: ``job``, ``enqueue``, ``aenqueue``, ``prepare``, ``bulk_enqueue``,
``enqueue_many``, ``current_job``, ``batch``, ``after``. Imported lazily so ``import django_dbjobs`` works
before Django's apps are ready.
"""

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
    "batch": "workflows",
    "after": "workflows",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'django_dbjobs' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"django_dbjobs.{module}"), name)
