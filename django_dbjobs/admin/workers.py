"""Workers: the run_jobs processes, their heartbeats, and the jobs each is running."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, DurationField, ExpressionWrapper, F, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce, Now
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy as _

from ..conf import settings
from ..models import Job, JobStatus, WorkerProcess
from . import dates, display
from .links import admin_url


@admin.register(WorkerProcess)
class WorkerProcessAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "hostname",
        "pid",
        "queues_display",
        "concurrency",
        "started_display",
        "heartbeat_display",
        "running_display",
    ]
    readonly_fields = [*list_display[:-1], "running_jobs"]  # the detail lists the jobs themselves
    fields = readonly_fields
    ordering = ["hostname", "started_at"]
    search_fields = ["hostname", "id"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a live worker would write its row again; a dead one's is swept

    def get_queryset(self, request):
        running = (
            Job.objects.filter(status=JobStatus.RUNNING, worker=OuterRef("pk"))
            .order_by()
            .values("worker")
            .annotate(count=Count("pk"))
            .values("count")
        )
        return (
            super()
            .get_queryset(request)
            .annotate(
                running_count=Coalesce(Subquery(running, output_field=IntegerField()), 0),
                # By the database clock, as the sweep judges it: this host's clock may be off.
                heartbeat_age=ExpressionWrapper(Now() - F("heartbeat_at"), output_field=DurationField()),
            )
        )

    @admin.display(description=_("queues"))
    def queues_display(self, worker: WorkerProcess) -> str:
        return ", ".join(worker.queues) if worker.queues else _("all")

    @admin.display(description=_("started"), ordering="started_at")
    def started_display(self, worker: WorkerProcess) -> str:
        return dates.moment(worker.started_at)

    @admin.display(description=_("last heartbeat"), ordering="heartbeat_at")
    def heartbeat_display(self, worker: WorkerProcess) -> str:
        age = worker.heartbeat_age.total_seconds()
        # To the second, as every moment of a job: "2 min 5 s ago", not "2 min ago".
        text = _("%(duration)s ago") % {"duration": dates.duration_text(max(age, 0))}
        when = dates.utc_text(worker.heartbeat_at)
        if age > settings.HEARTBEAT_TIMEOUT:
            return format_html(
                '<span class="dbjobs-paused" title="{}">{} ({})</span>', when, text, _("presumed dead")
            )
        return format_html('<span title="{}">{}</span>', when, text)

    @admin.display(description=_("running jobs"), ordering="running_count")
    def running_display(self, worker: WorkerProcess) -> str:
        count = getattr(worker, "running_count", 0)
        if not count:
            return "0"
        query = urlencode({"status": "RUNNING", "worker": worker.pk})
        url = admin_url(self, "changelist", model="job") + f"?{query}"
        return format_html('<a href="{}">{}</a>', url, count)

    @admin.display(description=_("running jobs"))
    def running_jobs(self, worker: WorkerProcess) -> str:
        jobs = Job.objects.filter(status=JobStatus.RUNNING, worker=worker.pk).order_by("last_attempted_at")[
            :200
        ]
        rows = [
            [
                format_html('<a href="{}">{}</a>', admin_url(self, "change", job.pk, model="job"), job.pk),
                job.name,
                job.queue,
                f"{job.attempts} / {job.max_attempts}",
                dates.moment(job.last_attempted_at),
            ]
            for job in jobs
        ]
        if not rows:
            return _("None.")
        return display.table([_("Job"), _("Name"), _("Queue"), _("Attempt"), _("Started")], rows)
