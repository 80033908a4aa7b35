"""ScheduleTick: one row per due time fired; its unique constraint makes a due time fire once."""

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from .schedule import Schedule


class ScheduleTick(models.Model):
    """One due time of a schedule that was fired: unique, so no due time is fired twice."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="ticks")
    due_at = models.DateTimeField(_("due at"))
    job_id = models.CharField(
        _("job"),
        max_length=36,
        null=True,
        blank=True,
        help_text=_("Empty: skipped, the previous run was active."),
    )
    fired_at = models.DateTimeField(_("fired at"), db_default=Now())
    fired_by = models.CharField(_("fired by worker"), max_length=64, blank=True, default="")

    class Meta:
        verbose_name = _("schedule tick")
        verbose_name_plural = _("schedule ticks")
        ordering = ["-due_at"]
        constraints = [
            models.UniqueConstraint(fields=["schedule", "due_at"], name="dbjobs_tick_one_per_due_time"),
        ]

    def __str__(self) -> str:
        return f"{self.schedule_id} @ {self.due_at.isoformat()}"
