"""Schedule: a cron expression that enqueues a job at each due time; ScheduleTick: one per due time fired."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..exceptions import InvalidSchedule
from .schedule_queryset import TIMING_FIELDS, ScheduleQuerySet
from .states import MAX_PRIORITY, MIN_PRIORITY

#: What Schedule needs from the schedules subsystem, which sits above the models:
#: ``definition_errors(definition)`` for clean() and ``run_now(schedule, using)``.
#: schedules/services.py lends them when the app is ready (AppConfig.ready()).
SERVICES: dict[str, Callable[..., Any]] = {}

#: Fields a save() of an edited schedule leaves alone: the schedulers write them.
KEPT_ON_SAVE = (
    "last_due_at",
    "last_job_id",
    "last_fired_at",
    "last_error",
    "last_manual_job_id",
    "last_manual_at",
    "created_at",
)
DEFAULT_CATCH_UP_WINDOW = 600


class MissedRuns(models.TextChoices):
    """What a scheduler does with due times that passed while no scheduler ran."""

    LATEST = "latest", _("Run the latest, if younger than the catch-up window")
    SKIP = "skip", _("Skip them")
    ALL = "all", _("Run each (the latest 100 at most)")


class DefinedIn(models.TextChoices):
    SETTINGS = "settings", _("DBJOBS_SCHEDULES setting")
    DATABASE = "database", _("Database")


def default_timezone() -> str:
    return django_settings.TIME_ZONE or "UTC"


class Schedule(models.Model):
    """A job enqueued at each due time of a cron expression, exactly once across all schedulers."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    cron = models.CharField(
        _("cron expression"),
        max_length=120,
        help_text=_("5 fields (minute hour day month weekday), 6 with seconds first, or @hourly, @daily..."),
    )
    timezone = models.CharField(
        _("timezone"),
        max_length=64,
        default=default_timezone,
        help_text=_("IANA name, such as Europe/Paris."),
    )
    job = models.CharField(_("job"), max_length=255, help_text=_("Registered name of the job to enqueue."))
    args = models.JSONField(_("positional arguments"), default=list, blank=True)
    kwargs = models.JSONField(_("keyword arguments"), default=dict, blank=True)
    queue = models.CharField(
        _("queue"), max_length=100, null=True, blank=True, help_text=_("Empty: the job's own queue.")
    )
    priority = models.SmallIntegerField(
        _("priority"), null=True, blank=True, help_text=_("Empty: the job's own priority.")
    )
    max_attempts = models.PositiveIntegerField(
        _("max attempts"), null=True, blank=True, help_text=_("Empty: the job's own default.")
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    missed_runs = models.CharField(
        _("missed runs"), max_length=10, choices=MissedRuns.choices, default=MissedRuns.LATEST
    )
    catch_up_window = models.PositiveIntegerField(
        _("catch-up window (seconds)"),
        default=DEFAULT_CATCH_UP_WINDOW,
        help_text=_("With 'latest': a missed run older than this is skipped."),
    )
    no_overlap = models.BooleanField(
        _("no overlap"),
        default=False,
        help_text=_("Skip a due time while this schedule's previous job is still waiting or running."),
    )
    due_time_argument = models.CharField(
        _("due time argument"),
        max_length=100,
        blank=True,
        help_text=_("Pass the due time (ISO 8601, UTC) to the job as this keyword argument."),
    )
    defined_in = models.CharField(
        _("defined in"), max_length=10, choices=DefinedIn.choices, default=DefinedIn.DATABASE, editable=False
    )
    # The `enabled` value DBJOBS_SCHEDULES gave at the last sync: a change there is the
    # developer's and applies; otherwise the operator's choice stands.
    settings_enabled = models.BooleanField(null=True, editable=False)
    removed_at = models.DateTimeField(
        _("removed from settings at"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("Left DBJOBS_SCHEDULES: kept with its history, never fired."),
    )
    next_due_at = models.DateTimeField(_("next due at"), null=True, blank=True, editable=False, db_index=True)
    last_due_at = models.DateTimeField(_("last due time fired"), null=True, blank=True, editable=False)
    last_job_id = models.CharField(_("last job"), max_length=36, null=True, blank=True, editable=False)
    last_fired_at = models.DateTimeField(_("last fired at"), null=True, blank=True, editable=False)
    last_error = models.TextField(_("last error"), blank=True, default="", editable=False)
    last_manual_job_id = models.CharField(
        _("last manual run's job"), max_length=36, null=True, blank=True, editable=False
    )
    last_manual_at = models.DateTimeField(_("last manual run at"), null=True, blank=True, editable=False)
    created_at = models.DateTimeField(_("created at"), db_default=Now(), editable=False)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    objects = ScheduleQuerySet.as_manager()

    class Meta:
        verbose_name = _("schedule")
        verbose_name_plural = _("schedules")
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(priority__gte=MIN_PRIORITY, priority__lte=MAX_PRIORITY),
                name="dbjobs_schedule_priority_range",
            ),
            models.CheckConstraint(
                condition=Q(missed_runs__in=MissedRuns.values), name="dbjobs_schedule_missed_runs_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def fireable(self) -> bool:
        return self.enabled and self.removed_at is None

    def cron_schedule(self):
        """This schedule's Cron (cron/expression.py); InvalidSchedule if the expression or timezone is bad."""
        from ..cron.expression import Cron

        return Cron(self.cron, self.timezone)

    def clean(self) -> None:
        errors = SERVICES["definition_errors"](self.definition())
        if not django_settings.USE_TZ:
            errors["timezone"] = "Schedules need USE_TZ = True: their due times are stored in UTC."
        if errors:
            raise ValidationError(errors)

    def definition(self) -> dict[str, Any]:
        """The fields a DBJOBS_SCHEDULES entry gives, as this schedule has them."""
        return {
            "job": self.job,
            "cron": self.cron,
            "timezone": self.timezone,
            "args": self.args,
            "kwargs": self.kwargs,
            "queue": self.queue,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
            "missed_runs": self.missed_runs,
            "catch_up_window": self.catch_up_window,
            "no_overlap": self.no_overlap,
            "due_time_argument": self.due_time_argument,
        }

    def save(self, *args, **kwargs) -> None:
        """Save; a new schedule, or one whose timing changed, is next due at its next due time from now.

        A schedule saved with unchanged timing keeps its next due time, so a save never
        skips (or repeats) a due time that is about to fire.
        """
        if not django_settings.USE_TZ:
            raise InvalidSchedule("Schedules need USE_TZ = True: their due times are stored in UTC.")
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and set(update_fields) & set(TIMING_FIELDS):
            self.next_due_at = self.cron_schedule().next_after(timezone.now()) if self.fireable else None
            kwargs["update_fields"] = {*update_fields, "next_due_at"}
        elif update_fields is None:
            adding = self._state.adding or kwargs.get("force_insert")
            stored = None
            if not adding:
                rows = Schedule.objects.using(kwargs.get("using") or self._state.db or "default")
                stored = rows.filter(pk=self.pk).values_list(*TIMING_FIELDS).first()
                adding = stored is None
            timing_changed = stored != tuple(getattr(self, name) for name in TIMING_FIELDS)
            fields = [] if adding else [f.attname for f in self._meta.concrete_fields if not f.primary_key]
            if adding or timing_changed or (self.fireable and self.next_due_at is None):
                self.next_due_at = self.cron_schedule().next_after(timezone.now()) if self.fireable else None
            elif not adding:
                fields.remove("next_due_at")  # the scheduler's to move: never write back a stale one
            if not adding:
                kwargs["update_fields"] = [f for f in fields if f not in KEPT_ON_SAVE]
        super().save(*args, **kwargs)

    def enable(self) -> None:
        self.enabled = True
        self.save()

    def disable(self) -> None:
        self.enabled = False
        self.save()

    def run_now(self, using: str | None = None):
        """Enqueue this schedule's job now, outside its due times (a manual run, not a tick).

        Return the job and whether it is new (with no_overlap, the active job instead).
        """
        return SERVICES["run_now"](self, using=using or self._state.db)
