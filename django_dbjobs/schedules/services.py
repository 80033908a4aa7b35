"""What the Schedule model needs of the schedules subsystem, lent to it when the app is ready.

The model sits below this package (a schedule's table knows nothing of firing it), so
its clean() and run_now() call what connect() put in models.schedule.SERVICES, and the
schedulers are woken when a schedule is saved or deleted.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_delete, post_save

from ..enqueuing import wakeup
from ..models import schedule
from . import definitions, firing


def connect() -> None:
    """Lend Schedule its validation and run_now(); wake the schedulers on every change (AppConfig.ready())."""
    schedule.SERVICES.update(definition_errors=definitions.definition_errors, run_now=firing.run_now)
    post_save.connect(_schedules_changed, sender=schedule.Schedule, dispatch_uid="dbjobs_schedule_saved")
    post_delete.connect(_schedules_changed, sender=schedule.Schedule, dispatch_uid="dbjobs_schedule_deleted")


def _schedules_changed(sender, instance, using, **kwargs) -> None:
    transaction.on_commit(wakeup.schedules_changed, using=using)
