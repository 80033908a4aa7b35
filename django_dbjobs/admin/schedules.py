"""Schedules: next and last runs, enable/disable, run now, and an edit form that validates."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery
from django.http import HttpResponseRedirect
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from ..exceptions import DbJobsError
from ..models import DefinedIn, Job, Schedule
from ..schedules.definitions import KEYS
from .confirm import confirm_action
from .known_jobs import import_error_messages, known_jobs
from .links import admin_url
from .schedule_columns import ScheduleColumnsMixin
from .schedule_form import ScheduleForm

#: The fields a DBJOBS_SCHEDULES entry also gives, in the form's order ("enabled" apart).
DEFINITION_FIELDS = ["name", *(key for key in KEYS if key != "enabled")]
STATE_FIELDS = [
    "defined_in",
    "state_display",
    "next_run",
    "last_run_display",
    "last_fired_display",
    "last_manual_display",
    "last_error",
    "removed_display",
]


@admin.register(Schedule)
class ScheduleAdmin(ScheduleColumnsMixin, admin.ModelAdmin):
    # The state in a column of its own: under the name, it read as part of the name's link.
    list_display = ["name", "state_display", "job_display", "cron_display", "next_run", "last_run_display"]
    list_filter = ["enabled", "defined_in"]
    search_fields = ["name", "job"]
    actions = ["enable_schedules", "disable_schedules", "run_now", "delete_schedules"]
    change_list_template = "admin/django_dbjobs/schedule_change_list.html"
    change_form_template = "admin/django_dbjobs/schedule_change_form.html"
    form = ScheduleForm

    def get_fieldsets(self, request, obj=None):
        options = DEFINITION_FIELDS[4:9]
        if self._from_settings(obj):  # shown, not edited: masked like a job's
            options = ["args_display", "kwargs_display", *DEFINITION_FIELDS[6:9]]
        return [
            (None, {"fields": [*DEFINITION_FIELDS[:4], "enabled"]}),
            (_("Job options"), {"fields": options}),
            (_("Missed runs and overlap"), {"fields": DEFINITION_FIELDS[9:]}),
            *([(_("State"), {"fields": STATE_FIELDS})] if obj is not None else []),
        ]

    def get_readonly_fields(self, request, obj=None):
        if self._from_settings(obj):
            # DBJOBS_SCHEDULES owns them; `enabled` stays
            return [*DEFINITION_FIELDS, "args_display", "kwargs_display", *STATE_FIELDS]
        return STATE_FIELDS

    @staticmethod
    def _from_settings(obj) -> bool:
        return obj is not None and obj.defined_in == DefinedIn.SETTINGS

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.defined_in == DefinedIn.SETTINGS and obj.removed_at is None:
            return False  # the next worker start would create it again: remove it from the setting
        return super().has_delete_permission(request, obj)

    def get_queryset(self, request):
        status = Job.objects.filter(pk=OuterRef("last_job_id")).values("status")[:1]
        return super().get_queryset(request).annotate(last_job_status=Subquery(status))

    # Actions

    @admin.action(description=gettext_lazy("Enable selected schedules"), permissions=["change"])
    def enable_schedules(self, request, queryset):
        count = queryset.enable()
        self.message_user(
            request, ngettext("%(n)d schedule enabled.", "%(n)d schedules enabled.", count) % {"n": count}
        )

    @admin.action(description=gettext_lazy("Disable selected schedules"), permissions=["change"])
    def disable_schedules(self, request, queryset):
        count = queryset.disable()
        self.message_user(
            request, ngettext("%(n)d schedule disabled.", "%(n)d schedules disabled.", count) % {"n": count}
        )

    @admin.action(description=gettext_lazy("Run selected schedules now"), permissions=["change"])
    def run_now(self, request, queryset):
        for schedule in queryset:
            self._run_now(request, schedule)

    def _run_now(self, request, schedule: Schedule) -> None:
        # Each message starts with "Schedule": the admin capitalises a message's first letter,
        # and the schedule's name is shown as it was written.
        not_run = _("Schedule %(name)s was not run: %(error)s")
        errors = import_error_messages()
        if errors and schedule.job not in known_jobs():
            # Enqueuing by name would import the job modules again, and raise.
            self.message_user(request, not_run % {"name": schedule.name, "error": errors[0]}, messages.ERROR)
            return
        try:
            job, created = schedule.run_now()
        except DbJobsError as exc:
            self.message_user(request, not_run % {"name": schedule.name, "error": exc}, messages.ERROR)
            return
        if created:
            self.message_user(
                request, _("Schedule %(name)s enqueued job %(job)s.") % {"name": schedule.name, "job": job.pk}
            )
        else:
            self.message_user(
                request,
                _("Schedule %(name)s was not run: its previous job %(job)s is still active (no overlap).")
                % {"name": schedule.name, "job": job.pk},
                messages.WARNING,
            )

    def get_actions(self, request, action_location=None):
        # action_location: Django 6.1's actions on the change form; absent on 5.2.
        extra = {} if action_location is None else {"action_location": action_location}
        actions = super().get_actions(request, **extra)
        actions.pop("delete_selected", None)  # it would delete schedules DBJOBS_SCHEDULES defines
        return actions

    @admin.action(description=gettext_lazy("Delete selected schedules"), permissions=["delete"])
    def delete_schedules(self, request, queryset):
        deletable = queryset.exclude(defined_in=DefinedIn.SETTINGS, removed_at=None)
        if request.POST.get("post") != "yes":
            return confirm_action(
                self,
                request,
                deletable,
                title=_("Delete schedules?"),
                question=_(
                    "These schedules and their history are deleted; their jobs stay. Schedules "
                    "DBJOBS_SCHEDULES still defines are left alone: remove them from the setting."
                ),
                button=_("Yes, delete them"),
                count="",
            )
        kept = queryset.filter(defined_in=DefinedIn.SETTINGS, removed_at=None).count()
        deleted = 0
        for schedule in deletable:
            schedule.delete()
            deleted += 1
        text = ngettext("%(n)d schedule deleted.", "%(n)d schedules deleted.", deleted) % {"n": deleted}
        if kept:
            text += " " + ngettext(
                "%(n)d kept: DBJOBS_SCHEDULES defines it.", "%(n)d kept: DBJOBS_SCHEDULES defines them.", kept
            ) % {"n": kept}
        self.message_user(request, text, messages.SUCCESS if deleted else messages.WARNING)
        return None

    # "Run now" on the detail page

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path(
                "<path:object_id>/run-now/",
                view(require_POST(self.run_now_view)),
                name="django_dbjobs_schedule_run_now",
            ),
            *super().get_urls(),
        ]

    def run_now_view(self, request, object_id):
        schedule = self.get_object(request, unquote(object_id))
        if schedule is None:
            self.message_user(request, _("That schedule no longer exists."), messages.WARNING)
            return HttpResponseRedirect(admin_url(self, "changelist", model="schedule"))
        if not self.has_change_permission(request, schedule):
            raise PermissionDenied
        self._run_now(request, schedule)
        return HttpResponseRedirect(admin_url(self, "change", quote(schedule.pk), model="schedule"))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        context = {
            **(extra_context or {}),
            "run_now_url": admin_url(self, "run_now", object_id, model="schedule"),  # quoted already
        }
        return super().change_view(request, object_id, form_url, context)
