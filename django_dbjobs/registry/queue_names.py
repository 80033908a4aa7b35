"""The queue names the code and settings give: the default, jobs' and tasks', schedules', TASKS'."""

from __future__ import annotations

from django.conf import settings as django_settings

from .. import registry
from ..conf import settings


def declared() -> set[str]:
    """The queues the code and settings name: the default, registered jobs' and tasks', schedules', TASKS'."""
    names = {settings.DEFAULT_QUEUE, *(settings.QUEUES or [])}
    for job in registry.registered().values():
        names.add(job.options.queue)
        names.add(getattr(getattr(job, "task", None), "queue_name", None))
    for definition in (settings.SCHEDULES or {}).values():
        if isinstance(definition, dict):
            names.add(definition.get("queue"))
    for backend in getattr(django_settings, "TASKS", {}).values():
        names.update(backend.get("QUEUES") or [])
    return {name for name in names if isinstance(name, str)}
