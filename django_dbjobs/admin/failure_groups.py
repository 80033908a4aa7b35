"""Dead letters by cause: each cause with its count, when, where, a sample, and Retry / Delete for all."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import router
from django.http import HttpResponseRedirect
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from ..models import FailedJob, FailureGroup, Job
from ..observability import failure_groups
from . import dates
from .audit import log_change
from .confirm import SHOWN, confirm_page
from .failed_jobs import cause_parameter, delete_message, fingerprint_of, retry_message
from .links import admin_url
from .queues import QueuePageMixin

#: Causes listed on the page, newest last seen first.
SHOWN_CAUSES = 50


@admin.register(FailureGroup)
class FailureGroupAdmin(QueuePageMixin, admin.ModelAdmin):
    """Read as the dead letters are (their `view` permission); changed as they are."""

    @staticmethod
    def jobs_db() -> str:
        """The database of the jobs, read and changed here: the router's for writes, as the
        changes are (so the list shown is the one Retry and Delete then see)."""
        return router.db_for_write(Job)

    def dead_letters_admin(self):
        return self.admin_site._registry[FailedJob]

    def has_view_permission(self, request, obj=None) -> bool:
        return self.dead_letters_admin().has_view_permission(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("retry/", view(self.retry_cause_view), name="django_dbjobs_failuregroup_retry"),
            path("delete/", view(self.delete_cause_view), name="django_dbjobs_failuregroup_delete"),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        dead_letters = self.dead_letters_admin()
        rows = failure_groups.causes(limit=SHOWN_CAUSES, using=self.jobs_db())
        for row in rows:
            query = urlencode({"cause": cause_parameter(row.fingerprint)})
            row.dead_letters_url = admin_url(self, "changelist", model="failedjob") + "?" + query
            row.retry_url = admin_url(self, "retry") + "?" + query
            row.delete_url = admin_url(self, "delete") + "?" + query
            row.first_seen_text = dates.moment(row.first_seen)
            row.last_seen_text = dates.moment(row.last_seen)
        context = {
            "causes": rows,
            "capped": len(rows) == SHOWN_CAUSES,
            "can_retry": dead_letters.has_retry_permission(request),
            "can_delete": dead_letters.has_delete_permission(request),
        }
        return self.render_page(
            request, "admin/django_dbjobs/failure_groups.html", _("Dead letters by cause"), context
        )

    def retry_cause_view(self, request):
        if not self.dead_letters_admin().has_retry_permission(request):
            raise PermissionDenied
        return self._change_cause(
            request,
            title=_("Retry every dead letter of this cause?"),
            question=_("Every dead letter of this cause is queued again, due now, attempts reset."),
            button=_("Yes, retry them"),
            destructive=False,
        )

    def delete_cause_view(self, request):
        if not self.dead_letters_admin().has_delete_permission(request):
            raise PermissionDenied
        return self._change_cause(
            request,
            title=_("Delete every dead letter of this cause?"),
            question=_("Every dead letter of this cause is deleted with its error history."),
            button=_("Yes, delete them"),
        )

    def _change_cause(self, request, *, title, question, button, destructive=True):
        """GET: the cause and its jobs, to confirm; POST: retry or delete them, in fenced batches."""
        back = admin_url(self, "changelist")
        fingerprint = fingerprint_of(request.GET.get("cause", ""))
        if request.method == "POST":
            change = self._delete if destructive else self._retry
            self.dead_letters_admin()._change(
                request, lambda request, _rows: change(request, fingerprint), None
            )
            return HttpResponseRedirect(back)
        found = failure_groups.cause(fingerprint, self.jobs_db())
        if found is None:
            self.message_user(request, _("No dead letter has this cause any more."), messages.WARNING)
            return HttpResponseRedirect(back)
        count = ngettext("%(n)d dead letter: %(summary)s", "%(n)d dead letters: %(summary)s", found.count) % {
            "n": found.count,
            "summary": found.summary,
        }
        return confirm_page(
            self.dead_letters_admin(),
            request,
            title=title,
            question=question,
            button=button,
            count=count,
            shown=list(
                failure_groups.dead_letters(fingerprint, self.jobs_db()).order_by("-finished_at", "-pk")[
                    : SHOWN + 1
                ]
            ),
            form_url="",
            cancel_url=back,
            destructive=destructive,
        )

    @staticmethod
    def _retry(request, fingerprint: str | None) -> tuple[str, int]:
        report = failure_groups.retry_cause(fingerprint, FailureGroupAdmin.jobs_db())
        log_change(
            request,
            "retried dead letters of a cause",
            cause=fingerprint,
            retried=report.retried,
            skipped=report.skipped,
        )
        return retry_message(report), report.retried

    @staticmethod
    def _delete(request, fingerprint: str | None) -> tuple[str, int]:
        deleted, skipped = failure_groups.delete_cause(fingerprint, FailureGroupAdmin.jobs_db())
        log_change(
            request, "deleted dead letters of a cause", cause=fingerprint, deleted=deleted, skipped=skipped
        )
        return delete_message(deleted, skipped), deleted
