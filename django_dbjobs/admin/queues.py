"""Queues: counts, lag and pause/resume per queue; and the overview page with the last hour's chart."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from ..exceptions import InvalidJob
from ..models import Overview, Queue
from ..operations.queue_stats import finished_per_minute
from ..operations.status import read_status, standing_problems
from . import dates, display
from .audit import log_change
from .chart import throughput_svg
from .links import admin_url


def paused_text(row) -> str:
    """'by ops at Dec. 3, 2026, 8:04:14 a.m.': who paused the queue, shown, not only on hover."""
    when = dates.moment(row.paused_at)
    if not row.paused_by:
        return format_html("{} {}", _("at"), when)
    return format_html("{} {}", _("by %(who)s at") % {"who": row.paused_by}, when)


class QueuePageMixin:
    """A page of its own in place of the changelist; nothing to add, edit or delete."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return HttpResponseRedirect(admin_url(self, "changelist"))

    def queue_context(self, request) -> dict:
        """The queues with their counts, and what dbjobs_status would report as wrong with them."""
        status = read_status()
        waiting_unknown: dict[str, int] = {}
        for unknown in status.unknown:
            waiting_unknown[unknown.queue] = waiting_unknown.get(unknown.queue, 0) + unknown.count
        rates = {rate.queue: rate for rate in status.flow.rates}
        for row in status.queues:
            row.lag_text = display.seconds_text(row.lag)
            row.paused_text = paused_text(row) if row.paused else ""
            row.unserved = status.unserved(row)
            row.unknown = waiting_unknown.get(row.name, 0)
            row.rate = rates.get(row.name)
        can_pause = request.user.has_perm("django_dbjobs.change_queue")
        return {
            "queue_rows": status.queues,
            "flow": status.flow,
            "has_rate_limits": bool(status.flow.rates),
            "problems": standing_problems(status),
            "live_workers_list": status.workers,
            "can_pause": can_pause,
            "pause_url": admin_url(self, "pause", model="queue"),
            "resume_url": admin_url(self, "resume", model="queue"),
        }

    def render_page(self, request, template: str, title: str, context: dict):
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "has_view_permission": True,
            **context,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, template, context)


@admin.register(Queue)
class QueueAdmin(QueuePageMixin, admin.ModelAdmin):
    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("pause/", view(require_POST(self.pause_view)), name="django_dbjobs_queue_pause"),
            path("resume/", view(require_POST(self.resume_view)), name="django_dbjobs_queue_resume"),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        return self.render_page(
            request, "admin/django_dbjobs/queues.html", _("Queues"), self.queue_context(request)
        )

    def pause_view(self, request):
        return self._pause_or_resume(request, pause=True)

    def resume_view(self, request):
        return self._pause_or_resume(request, pause=False)

    def _pause_or_resume(self, request, pause: bool):
        if not self.has_change_permission(request):
            raise PermissionDenied
        name = request.POST.get("queue", "")
        back = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(back, {request.get_host()}, require_https=request.is_secure()):
            back = admin_url(self, "changelist", model="queue")
        user = request.user.get_username()
        try:
            changed = Queue.objects.pause([name], by=user) if pause else Queue.objects.resume([name])
        except InvalidJob as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return HttpResponseRedirect(back)
        if changed:
            log_change(request, "paused a queue" if pause else "resumed a queue", queue=name)
            text = (
                _("Queue %(name)s paused: workers stop claiming from it within a second or two.")
                if pause
                else _("Queue %(name)s resumed.")
            )
            self.message_user(request, text % {"name": name}, messages.SUCCESS)
        else:
            text = _("Queue %(name)s was already paused.") if pause else _("Queue %(name)s was not paused.")
            self.message_user(request, text % {"name": name}, messages.WARNING)
        return HttpResponseRedirect(back)


@admin.register(Overview)
class OverviewAdmin(QueuePageMixin, admin.ModelAdmin):
    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("django_dbjobs.view_job")

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request)

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        minutes = finished_per_minute(60)
        queues = self.queue_context(request)
        workers = queues["live_workers_list"]
        context = {
            **queues,
            "chart": throughput_svg(minutes),
            "succeeded_last_hour": sum(m.succeeded for m in minutes),
            "failed_last_hour": sum(m.failed for m in minutes),
            "live_workers": len(workers),
            "live_threads": sum(worker.concurrency for worker in workers),
            "dead_letters_url": admin_url(self, "changelist", model="failedjob"),
            "workers_url": admin_url(self, "changelist", model="workerprocess"),
            "can_see_dead_letters": request.user.has_perm("django_dbjobs.view_failedjob"),
        }
        return self.render_page(request, "admin/django_dbjobs/overview.html", _("Jobs overview"), context)
