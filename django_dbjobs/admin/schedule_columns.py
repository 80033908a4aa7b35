"""What the schedule pages show of a schedule: its cron, next and last runs, state, masked arguments."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..models import Schedule
from ..schedules.report import state
from . import dates, display
from .job_columns import breakable
from .links import admin_url
from .masking import masked_arguments


class ScheduleColumnsMixin:
    """The schedule list's columns and the read-only fields of a schedule's page."""

    @admin.display(description=gettext_lazy("job"), ordering="job")
    def job_display(self, schedule: Schedule) -> str:
        return breakable(schedule.job)

    @admin.display(description=gettext_lazy("cron"), ordering="cron")
    def cron_display(self, schedule: Schedule) -> str:
        return format_html(
            '<code>{}</code><div class="dbjobs-when-label">{}</div>', schedule.cron, schedule.timezone
        )

    @admin.display(description=gettext_lazy("next run"), ordering="next_due_at")
    def next_run(self, schedule: Schedule) -> str:
        """In the admin's timezone like every date here; UTC and the schedule's own timezone on hover."""
        return dates.moment(schedule.next_due_at, also_in=schedule.timezone) or "-"

    @admin.display(description=gettext_lazy("last run"), ordering="last_due_at")
    def last_run_display(self, schedule: Schedule) -> str:
        if not schedule.last_job_id:
            return "-"
        status = getattr(schedule, "last_job_status", None)
        link = admin_url(self, "change", quote(schedule.last_job_id), model="job")
        return format_html(
            '{}<div><a href="{}">{}</a></div>',
            dates.moment(schedule.last_due_at, also_in=schedule.timezone),
            link,
            display.status_badge(status) if status else _("(deleted)"),
        )

    @admin.display(description=gettext_lazy("last manual run"))
    def last_manual_display(self, schedule: Schedule) -> str:
        if not schedule.last_manual_job_id:
            return "-"
        link = admin_url(self, "change", quote(schedule.last_manual_job_id), model="job")
        return format_html(
            '{} <a href="{}"><code class="dbjobs-id">{}</code></a>',
            dates.moment(schedule.last_manual_at),
            link,
            schedule.last_manual_job_id,
        )

    @admin.display(description=gettext_lazy("last fired at"))
    def last_fired_display(self, schedule: Schedule) -> str:
        return dates.moment(schedule.last_fired_at) or "-"

    @admin.display(description=gettext_lazy("removed from settings at"))
    def removed_display(self, schedule: Schedule) -> str:
        return dates.moment(schedule.removed_at) or "-"

    @admin.display(description=gettext_lazy("state"))
    def state_display(self, schedule: Schedule) -> str:
        text = state(schedule)
        if schedule.last_error:
            return format_html('<span class="dbjobs-paused" title="{}">{}</span>', schedule.last_error, text)
        return text

    @admin.display(description=gettext_lazy("positional arguments"))
    def args_display(self, schedule: Schedule) -> str:
        return display.pretty_json(masked_arguments(schedule.job, schedule.args, schedule.kwargs)[0])

    @admin.display(description=gettext_lazy("keyword arguments"))
    def kwargs_display(self, schedule: Schedule) -> str:
        return display.pretty_json(masked_arguments(schedule.job, schedule.args, schedule.kwargs)[1])
