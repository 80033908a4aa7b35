"""The job list: read-only, fast on millions of rows; READY jobs can be cancelled, RUNNING ones stopped."""

from __future__ import annotations

import uuid

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..models import Job, JobStatus
from ..observability import log_fields
from .audit import log_change
from .confirm import confirm_action, confirm_page, selected_count
from .job_columns import JobColumnsMixin
from .job_detail import JobDetailMixin
from .known_jobs import known_jobs
from .links import admin_url
from .listing import FastListMixin, FlowFilter, JobNameFilter, PriorityFilter, QueueFilter, enqueued_id_range
from .live_progress import LiveProgressMixin

DETAIL_FIELDSETS = [
    (
        None,
        {
            "fields": [
                "id_display",
                "name",
                "status_display",
                "queue",
                "priority",
                "attempts_display",
                "unique_key_display",
                "concurrency_display",
                "workflow_display",
            ]
        },
    ),
    # First after the job itself: while it runs, what a reader came to see.
    (LiveProgressMixin.PROGRESS_FIELDSET_TITLE, {"fields": ["progress_display", "checkpoint_display"]}),
    (_("Arguments and result"), {"fields": ["arguments", "return_value_display", "context_display"]}),
    (_("Timeline"), {"fields": ["timeline"]}),
    (_("Attempts"), {"fields": ["attempts_table"]}),
]


class JobAdminBase(LiveProgressMixin, JobColumnsMixin, JobDetailMixin, FastListMixin, admin.ModelAdmin):
    """What the job list and the dead-letter list share: a read-only, fast list and detail page."""

    list_filter = ["status", QueueFilter, JobNameFilter, PriorityFilter]
    search_fields = ["id", "name", "unique_key"]  # matched exactly: see get_search_results()
    search_help_text = _("An exact job id, job name or unique key.")
    date_hierarchy = "enqueued_at"
    change_list_template = "admin/django_dbjobs/job_change_list.html"
    change_form_template = "admin/django_dbjobs/job_change_form.html"
    fieldsets = DETAIL_FIELDSETS
    readonly_fields = [field for _name, options in DETAIL_FIELDSETS for field in options["fields"]]

    class Media:
        js = ["django_dbjobs/copy.js", "django_dbjobs/progress.js"]  # the Copy buttons, live progress

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the detail page is read-only; state changes are actions

    def may_change_jobs(self, request) -> bool:
        """The model's `change` permission, which the actions that change jobs ask for."""
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    def get_actions(self, request, action_location=None):
        # action_location: Django 6.1's actions on the change form; absent on 5.2.
        extra = {} if action_location is None else {"action_location": action_location}
        actions = super().get_actions(request, **extra)
        # Only this admin's own, fenced actions: not delete_selected (it would delete jobs of
        # any status), nor actions other apps add to every admin (admin.site.add_action).
        return {name: action for name, action in actions.items() if name in (self.actions or ())}

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        bounds = enqueued_id_range(request.GET)
        if bounds is not None:
            queryset = queryset.filter(pk__gte=bounds[0], pk__lt=bounds[1])
        return queryset

    def get_search_results(self, request, queryset, search_term):
        """Exact matches only, each served by an index: the id, or the job name or unique key."""
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            job_id = str(uuid.UUID(term))  # any spelling of a UUID, as ids are stored
        except ValueError:
            # A job name, or else a unique key: one indexed condition each, never an OR of
            # the two (MariaDB merges both indexes and sorts every match).
            if term in known_jobs() or Job.objects.filter(name=term).exists():
                return queryset.filter(name=term), False
            return queryset.filter(unique_key=term), False
        return queryset.filter(pk=job_id), False

    # Deleting one job from its page: fenced like the actions

    def delete_view(self, request, object_id, extra_context=None):
        """Delete one job: fenced like the actions, so a job claimed meanwhile is left alone."""
        job = self.get_object(request, unquote(object_id))
        if job is None:
            self.message_user(request, _("That job no longer exists."), messages.WARNING)
            return HttpResponseRedirect(admin_url(self, "changelist"))
        if not self.has_delete_permission(request):  # the status is the fenced DELETE's to judge
            raise PermissionDenied
        if request.method == "POST":
            deleted = self.delete_fenced(self.model.objects.filter(pk=job.pk))
            log_change(
                request,
                f"deleted {self.opts.model_name} {job.pk}",
                extra=log_fields.for_job(job),
                deleted=deleted,
            )
            if deleted:
                kept = self.model.objects.filter(pk=job.pk).exists()  # a workflow's job: recorded cancelled
                done = _("The job was cancelled: it belongs to a workflow, so it stays as a dead letter.")
                self.message_user(request, done if kept else _("The job was deleted."), messages.SUCCESS)
                return HttpResponseRedirect(admin_url(self, "changelist"))
            self.message_user(
                request,
                _("Nothing deleted: the job is no longer %(status)s.") % {"status": self.deletable_label},
                messages.WARNING,
            )
            return HttpResponseRedirect(admin_url(self, "change", job.pk))
        if job.status != self.deletable_status:
            self.message_user(
                request,
                _("Only a %(status)s job can be deleted here.") % {"status": self.deletable_label},
                messages.WARNING,
            )
            return HttpResponseRedirect(admin_url(self, "change", job.pk))
        return confirm_page(
            self,
            request,
            title=_("Delete this job?"),
            question=_(
                "This deletes the job and its history. Only a job that is still %(status)s is deleted."
            )
            % {"status": self.deletable_label},
            button=_("Yes, delete it"),
            count="",
            shown=[job],
            form_url="",
            cancel_url=admin_url(self, "change", job.pk),
        )

    deletable_label = _("ready")
    deletable_status = JobStatus.READY

    def delete_fenced(self, queryset) -> int:
        return queryset.delete_ready()


@admin.register(Job)
class JobAdmin(JobAdminBase):
    list_display = ["id_column", "name_and_error", "status_and_attempts", "queue", "when"]
    list_filter = ["status", QueueFilter, JobNameFilter, PriorityFilter, FlowFilter]
    list_display_links = ["name_and_error"]
    ordering = ["-pk"]  # newest first: ids are UUIDv7, ordered by enqueue time
    actions = ["cancel", "stop_running"]

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.status != JobStatus.READY:
            return False  # only a READY job can be cancelled
        return super().has_delete_permission(request, obj)

    @admin.action(description=_("Cancel (delete) selected ready jobs"), permissions=["delete"])
    def cancel(self, request, queryset):
        if request.POST.get("post") != "yes":
            return confirm_action(
                self,
                request,
                queryset.ready(),
                title=_("Cancel ready jobs?"),
                question=_(
                    "These jobs are deleted if still ready; running and finished ones are left alone. "
                    "A job of a batch, or one other jobs wait for, is recorded cancelled instead."
                ),
                button=_("Yes, cancel them"),
                count="",
            )
        cancelled = queryset.delete_ready()
        skipped = max(selected_count(request) - cancelled, 0)
        log_change(request, "cancelled ready jobs", cancelled=cancelled, skipped=skipped)
        self._told(
            request,
            cancelled,
            ngettext("%(n)d ready job cancelled.", "%(n)d ready jobs cancelled.", cancelled),
            skipped,
            ngettext(
                "%(n)d skipped: not ready (running or finished).",
                "%(n)d skipped: not ready (running or finished).",
                skipped,
            ),
        )
        return None

    def _told(self, request, done: int, said: str, skipped: int, skipped_said: str) -> None:
        """Tell the user how many jobs an action changed, and how many it skipped and why."""
        text = said % {"n": done} + (" " + skipped_said % {"n": skipped} if skipped else "")
        self.message_user(request, text, messages.SUCCESS if done else messages.WARNING)

    def has_stop_permission(self, request, obj=None) -> bool:
        """Stopping a running job changes it: the `change` permission (the page stays read-only)."""
        return self.may_change_jobs(request)

    @admin.action(description=_("Stop (cancel) selected running jobs"), permissions=["stop"])
    def stop_running(self, request, queryset):
        if request.POST.get("post") != "yes":
            return confirm_action(
                self,
                request,
                queryset.running(),
                title=_("Stop running jobs?"),
                question=_(
                    "Each job still running is interrupted by its worker within about a second and "
                    "recorded as cancelled (failed, never retried). A job that finishes first keeps "
                    "its outcome; ready and finished jobs are left alone."
                ),
                button=_("Yes, stop them"),
                count="",
            )
        asked = queryset.request_cancel()
        skipped = max(selected_count(request) - asked, 0)
        log_change(request, "requested cancellation of running jobs", asked=asked, skipped=skipped)
        self._told(
            request,
            asked,
            ngettext("%(n)d running job asked to stop.", "%(n)d running jobs asked to stop.", asked),
            skipped,
            ngettext(
                "%(n)d skipped: not running, or asked already.",
                "%(n)d skipped: not running, or asked already.",
                skipped,
            ),
        )
        return None
