"""Batches: their progress (from their jobs' statuses), their callbacks, and their jobs."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy as _

from ..models import Batch, Job, JobStatus
from . import dates, display
from .batch_progress import StatusGroup, status_groups, summed_html
from .links import admin_url


def progress(counts: dict[str, int], total: int) -> str:
    """A bar of done / failed / pending jobs, with the numbers."""
    done, failed = counts.get(JobStatus.SUCCESSFUL, 0), counts.get(JobStatus.FAILED, 0)
    pending = max(total - done - failed, 0)
    width = max(total, 1)
    return format_html(
        '<span class="dbjobs-progress" title="{}">'
        '<span class="dbjobs-progress-done" style="width:{}%"></span>'
        '<span class="dbjobs-progress-failed" style="width:{}%"></span></span> {}',
        _("%(done)s succeeded, %(failed)s failed, %(pending)s pending")
        % {"done": done, "failed": failed, "pending": pending},
        round(100 * done / width, 1),
        round(100 * failed / width, 1),
        _("%(done)s done, %(failed)s failed, %(pending)s pending of %(total)s")
        % {"done": done, "failed": failed, "pending": pending, "total": total},
    )


@admin.register(Batch)
class BatchAdmin(admin.ModelAdmin):
    list_display = ["batch_display", "counted_progress_display", "created_display", "finished_display"]
    readonly_fields = [
        "id_display",
        "description",
        "progress_display",
        "reported_progress_display",
        "counted_display",
        "callbacks_display",
        "jobs_display",
        "created_display",
        "finished_display",
    ]
    fields = readonly_fields
    search_fields = ["id", "description"]
    ordering = ["-created_at", "id"]
    list_per_page = 50
    change_list_template = "admin/django_dbjobs/batch_change_list.html"
    change_form_template = "admin/django_dbjobs/batch_change_form.html"

    class Media:
        js = ["django_dbjobs/copy.js"]  # the Copy button of the id

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # retention deletes finished batches with their jobs

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("django_dbjobs.view_job") or super().has_view_permission(request, obj)

    def _groups(self, batch: Batch) -> dict[str, StatusGroup]:
        """The batch's jobs by status, their progress summed, read once per page (the batch-jobs index)."""
        cached = getattr(batch, "_status_groups", None)
        if cached is None:
            cached = batch._status_groups = status_groups(batch.pk)
        return cached

    def _counts(self, batch: Batch) -> dict[str, int]:
        return {status: group.jobs for status, group in self._groups(batch).items()}

    @admin.display(description=_("id"))
    def id_display(self, batch: Batch) -> str:
        return format_html('<code class="dbjobs-id">{}</code> {}', batch.pk, display.copy_button(batch.pk))

    @admin.display(description=_("batch"))
    def batch_display(self, batch: Batch) -> str:
        return batch.description or batch.pk

    @admin.display(description=_("progress"))
    def progress_display(self, batch: Batch) -> str:
        """From its jobs' statuses (a retried dead letter shows as pending again)."""
        return progress(self._counts(batch), batch.total)

    @admin.display(description=_("reported progress"))
    def reported_progress_display(self, batch: Batch) -> str:
        """What its jobs reported with current_job().progress(), summed."""
        return summed_html(self._groups(batch))

    @admin.display(description=_("progress"))
    def counted_progress_display(self, batch: Batch) -> str:
        """From the batch's own counts: the list reads no job."""
        return progress({JobStatus.SUCCESSFUL: batch.succeeded, JobStatus.FAILED: batch.failed}, batch.total)

    @admin.display(description=_("counted for its callbacks"))
    def counted_display(self, batch: Batch) -> str:
        return _(
            "%(total)s jobs: %(succeeded)s succeeded, %(failed)s failed (dead-lettered or cancelled)"
        ) % {
            "total": batch.total,
            "succeeded": batch.succeeded,
            "failed": batch.failed,
        }

    @admin.display(description=_("callbacks"))
    def callbacks_display(self, batch: Batch) -> str:
        callbacks = batch.callback_ids()
        if not callbacks:
            return _("None.")
        found = {job.pk: job for job in Job.objects.filter(pk__in=list(callbacks.values()))}
        labels = {
            "on_success": _("on success"),
            "on_failure": _("on failure"),
            "on_complete": _("on complete"),
        }
        rows = []
        for kind, pk in callbacks.items():
            job = found.get(pk)
            if job is None:
                state = _("not run: it does not apply") if batch.finished_at else _("deleted")
                rows.append([labels[kind], pk, state])
                continue
            link = format_html('<a href="{}">{}</a>', admin_url(self, "change", pk, model="job"), job.name)
            state = (
                _("waiting for the batch")
                if job.status == JobStatus.READY and job.blocked == "AFTER"
                else None
            )
            rows.append([labels[kind], link, state or display.status_badge(job.status)])
        return display.table([_("Callback"), _("Job"), _("Status")], rows)

    @admin.display(description=_("jobs"))
    def jobs_display(self, batch: Batch) -> str:
        base = admin_url(self, "changelist", model="job")
        links = [format_html('<a href="{}?{}">{}</a>', base, urlencode({"batch": batch.pk}), _("All"))]
        for status, count in sorted(self._counts(batch).items()):
            query = urlencode({"batch": batch.pk, "status": status})
            links.append(
                format_html('<a href="{}?{}">{} ({})</a>', base, query, JobStatus(status).label, count)
            )
        return format_html(" · ".join(["{}"] * len(links)), *links)

    @admin.display(description=_("created"), ordering="created_at")
    def created_display(self, batch: Batch) -> str:
        return dates.moment(batch.created_at)

    @admin.display(description=_("finished"), ordering="finished_at")
    def finished_display(self, batch: Batch) -> str:
        return dates.moment(batch.finished_at) if batch.finished_at else _("not yet")
