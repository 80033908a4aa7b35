"""The dead letters: FAILED jobs, newest first, with Retry and Delete."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError
from django.http import HttpResponseRedirect
from django.urls import path
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from ..models import FailedJob, FailedJobQuerySet, JobStatus, RetryReport
from . import dates
from .audit import log_change
from .confirm import confirm_action, selected_count
from .job_columns import tries
from .jobs import JobAdminBase
from .links import admin_url
from .listing import COUNT_CAP, CappedCountPaginator, JobNameFilter, QueueFilter


def retry_message(report: RetryReport) -> str:
    parts = [
        ngettext("%(n)d job queued again.", "%(n)d jobs queued again.", report.retried)
        % {"n": report.retried}
    ]
    if report.key_held:
        parts.append(
            ngettext(
                "%(n)d skipped: its unique key is held by another ready or running job.",
                "%(n)d skipped: their unique keys are held by other ready or running jobs.",
                report.key_held,
            )
            % {"n": report.key_held}
        )
    if report.not_failed:
        parts.append(
            ngettext(
                "%(n)d skipped: no longer failed (retried or deleted meanwhile).",
                "%(n)d skipped: no longer failed (retried or deleted meanwhile).",
                report.not_failed,
            )
            % {"n": report.not_failed}
        )
    return " ".join(parts)


def delete_message(deleted: int, skipped: int) -> str:
    text = ngettext("%(n)d dead letter deleted.", "%(n)d dead letters deleted.", deleted) % {"n": deleted}
    if skipped:
        text += " " + ngettext(
            "%(n)d skipped: no longer failed (retried or deleted meanwhile).",
            "%(n)d skipped: no longer failed (retried or deleted meanwhile).",
            skipped,
        ) % {"n": skipped}
    return text


#: The value of ``?cause=`` for dead letters stored before causes were (no fingerprint).
NO_FINGERPRINT = "none"


def cause_parameter(fingerprint: str | None) -> str:
    return NO_FINGERPRINT if fingerprint is None else fingerprint


def fingerprint_of(value: str) -> str | None:
    return None if value == NO_FINGERPRINT else value


class CauseFilter(admin.SimpleListFilter):
    """The dead letters of one cause (their error_fingerprint), as linked from the page of causes."""

    title = gettext_lazy("cause")
    parameter_name = "cause"

    def lookups(self, request, model_admin):
        return [(self.value(), self.value())] if self.value() else []

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        return queryset.filter(error_fingerprint=fingerprint_of(self.value()))


@admin.register(FailedJob)
class FailedJobAdmin(JobAdminBase):
    list_display = ["id_column", "name_and_error", "queue", "failed_at"]
    list_display_links = ["name_and_error"]
    list_filter = [QueueFilter, JobNameFilter, CauseFilter]
    ordering = ["-finished_at", "-pk"]
    actions = ["retry", "delete_dead_letters"]
    deletable_label = gettext_lazy("failed")
    deletable_status = JobStatus.FAILED

    @admin.display(description=gettext_lazy("failed at"), ordering="finished_at")
    def failed_at(self, job) -> str:
        return format_html(
            '{}<div class="dbjobs-when-label">{}</div>', dates.moment(job.finished_at), tries(job)
        )

    def has_retry_permission(self, request, obj=None) -> bool:
        """Retrying is changing a dead letter: the `change` permission (the page itself stays read-only)."""
        return self.may_change_jobs(request)

    def delete_fenced(self, queryset) -> int:
        return queryset.delete_all()[0]

    # Actions on the selected rows

    @admin.action(description=gettext_lazy("Retry selected dead letters"), permissions=["retry"])
    def retry(self, request, queryset):
        self._change(request, self._retry, queryset)

    @admin.action(description=gettext_lazy("Delete selected dead letters"), permissions=["delete"])
    def delete_dead_letters(self, request, queryset):
        if request.POST.get("post") != "yes":
            return confirm_action(
                self,
                request,
                queryset,
                title=_("Delete dead letters?"),
                question=_("These failed jobs and their error history will be deleted."),
                button=_("Yes, delete them"),
                count="",
            )
        self._change(request, self._delete, queryset)
        return None

    # The changes themselves, for the actions, the buttons and "all matching"

    def _change(self, request, change, queryset) -> None:
        """Run `change` and say what it did; a database error part-way is a message, not an error page."""
        try:
            text, changed = change(request, queryset)
        except DatabaseError as exc:
            text = _(
                "A database error stopped this part-way: %(error)s. Rows already changed stay "
                "changed; run it again for the rest."
            ) % {"error": exc}
            self.message_user(request, text, messages.ERROR)
            return
        self.message_user(request, text, messages.SUCCESS if changed else messages.WARNING)

    def _retry(self, request, queryset) -> tuple[str, int]:
        report = queryset.retry_all()
        # Rows ticked on the page that left the dead letters since (a double submit).
        report.not_failed += max(selected_count(request) - report.retried - report.skipped, 0)
        log_change(request, "retried dead letters", retried=report.retried, skipped=report.skipped)
        return retry_message(report), report.retried

    def _delete(self, request, queryset) -> tuple[str, int]:
        deleted, skipped = queryset.delete_all()
        skipped += max(selected_count(request) - deleted - skipped, 0)
        log_change(request, "deleted dead letters", deleted=deleted, skipped=skipped)
        return delete_message(deleted, skipped), deleted

    # Buttons: on the detail page, and "all matching the current filter" on the list

    def get_urls(self):
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        view = self.admin_site.admin_view
        return [
            path("retry-matching/", view(self.retry_matching_view), name=f"{prefix}_retry_matching"),
            path("delete-matching/", view(self.delete_matching_view), name=f"{prefix}_delete_matching"),
            path("<path:object_id>/retry/", view(require_POST(self.retry_view)), name=f"{prefix}_retry"),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        query = request.GET.urlencode()
        suffix = f"?{query}" if query else ""
        tools = []
        if self.has_retry_permission(request):
            tools.append(
                {"url": admin_url(self, "retry_matching") + suffix, "label": _("Retry all matching")}
            )
        if self.has_delete_permission(request):
            tools.append(
                {"url": admin_url(self, "delete_matching") + suffix, "label": _("Delete all matching")}
            )
        return super().changelist_view(request, {**(extra_context or {}), "dbjobs_list_tools": tools})

    def change_view(self, request, object_id, form_url="", extra_context=None):
        context = {
            **(extra_context or {}),
            "can_retry": self.has_retry_permission(request),
            "retry_url": admin_url(self, "retry", object_id),  # as it came: quoted already
        }
        return super().change_view(request, object_id, form_url, context)

    def retry_view(self, request, object_id):
        if not self.has_retry_permission(request):
            raise PermissionDenied
        # Not narrowed to FAILED first: a job retried meanwhile is reported as skipped by the fence.
        self._change(request, self._retry, FailedJobQuerySet(FailedJob).filter(pk=unquote(object_id)))
        return HttpResponseRedirect(admin_url(self, "changelist"))

    def retry_matching_view(self, request):
        if not self.has_retry_permission(request):
            raise PermissionDenied
        return self._matching(
            request,
            self._retry,
            title=_("Retry all matching dead letters?"),
            question=_(
                "Every dead letter matching the current filter is queued again, due now, attempts reset."
            ),
            button=_("Yes, retry them"),
            destructive=False,
        )

    def delete_matching_view(self, request):
        if not self.has_delete_permission(request):
            raise PermissionDenied
        return self._matching(
            request,
            self._delete,
            title=_("Delete all matching dead letters?"),
            question=_("Every dead letter matching the current filter is deleted with its error history."),
            button=_("Yes, delete them"),
        )

    def _matching(self, request, change, *, title, question, button, destructive=True):
        """GET: what the current filter matches, to confirm; POST: change it in batches."""
        query = request.GET.urlencode()
        back = admin_url(self, "changelist") + (f"?{query}" if query else "")
        try:
            queryset = self.get_changelist_instance(request).get_queryset(request)
        except IncorrectLookupParameters:
            self.message_user(request, _("Those filters are not valid here."), messages.ERROR)
            return HttpResponseRedirect(admin_url(self, "changelist"))
        if request.method == "POST":
            self._change(request, change, queryset)
            return HttpResponseRedirect(back)
        counted = CappedCountPaginator(queryset, 1)
        count = (
            _("More than %(n)s dead letters match.") % {"n": COUNT_CAP}
            if counted.capped
            else ngettext("%(n)d dead letter matches.", "%(n)d dead letters match.", counted.count)
            % {"n": counted.count}
        )
        return confirm_action(
            self,
            request,
            queryset,
            title=title,
            question=question,
            button=button,
            count=count,
            cancel_url=back,
            destructive=destructive,
        )
