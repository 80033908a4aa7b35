"""Progress shown live: in the list's status column, the job page's fields, and the JSON view they poll.

While a job runs, each of these is wrapped in an element static/django_dbjobs/progress.js
refreshes every second or so from ``progress/`` (this module's view), until the job no longer runs.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import JsonResponse
from django.urls import path
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from ..models import Job, JobStatus
from ..models.progress import Progress
from . import progress_display
from .links import admin_url

#: The most jobs one request asks about: a list's page at most, "Show all" included
#: (Django's list_max_show_all, 200).
MAX_IDS = 200
#: What a page may ask to refresh: a list's status cell (with the progress), a job page's progress
#: block, checkpoint and status.
PARTS = ("status_line", "block", "checkpoint", "status")
#: The fields of a job the refresh shows only if asked, and the ones it never reads.
UNREAD_FIELDS = ("args", "kwargs", "return_value", "context")


class LiveProgressMixin:
    """The progress of the job admins' list and pages, kept fresh while their jobs run."""

    PROGRESS_FIELDSET_TITLE = _("Progress")

    @admin.display(description=_("progress"))
    def progress_display(self, job: Job) -> str:
        return self._live(job, "block")

    @admin.display(description=_("checkpoint"))
    def checkpoint_display(self, job: Job) -> str:
        return self._live(job, "checkpoint")

    @admin.display(description=_("status"), ordering="status")
    def status_and_attempts(self, job: Job) -> str:
        return self._live(job, "status_line")

    @admin.display(description=_("status"))
    def status_display(self, job: Job) -> str:
        return self._live(job, "status")

    def get_fieldsets(self, request, obj=None):
        """The Progress fieldset only for a job that runs, reported progress or stored a checkpoint."""
        fieldsets = super().get_fieldsets(request, obj)  # type: ignore[misc]
        if obj is not None and (
            obj.status == JobStatus.RUNNING
            or obj.progress_state is not None
            or obj.checkpoint_state is not None
        ):
            return fieldsets
        return [(title, options) for title, options in fieldsets if title != self.PROGRESS_FIELDSET_TITLE]

    def _render(self, job: Job, part: str) -> str:
        """One part's HTML, as it shows inside its live element."""
        if part == "block":
            return progress_display.page_block(job)
        if part == "checkpoint":
            return progress_display.checkpoint(job)
        if part == "status":
            return super().status_display(job)  # type: ignore[misc]
        # The list's progress goes in its status column: the lists keep to five columns (1280 px).
        status = super().status_and_attempts(job)  # type: ignore[misc]
        return format_html("{}{}", status, progress_display.list_cell(job))

    def _live(self, job: Job, part: str) -> str:
        """`part` of `job`; in an element progress.js refreshes while the job runs."""
        html = self._render(job, part)
        if job.status != JobStatus.RUNNING:
            return html
        return format_html(
            '<div class="dbjobs-live" data-dbjobs-job="{}" data-dbjobs-part="{}" data-dbjobs-url="{}" '
            'data-dbjobs-running="">{}</div>',
            job.pk,
            part,
            admin_url(self, "progress", model="job"),
            html,
        )

    def get_urls(self):
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"  # type: ignore[attr-defined]
        view = self.admin_site.admin_view(require_GET(self.progress_view))  # type: ignore[attr-defined]
        return [path("progress/", view, name=f"{prefix}_progress"), *super().get_urls()]  # type: ignore[misc]

    def progress_view(self, request):
        """``?id=<job>&part=<part>``, ids and parts repeated: each job's status, progress and parts as JSON.

        Read-only, for GET: the admin's own login and the model's view permission guard it.
        """
        if not self.has_view_permission(request):  # type: ignore[attr-defined]
            raise PermissionDenied
        ids, parts = request.GET.getlist("id"), list(dict.fromkeys(request.GET.getlist("part")))
        problem = _problem(ids, parts)
        if problem:
            return JsonResponse({"error": problem}, status=400)
        unread = list(UNREAD_FIELDS)
        if "checkpoint" not in parts:
            unread.append("checkpoint_state")
        # The admin's own queryset: a project narrowing what a user sees there narrows this too.
        jobs = self.get_queryset(request)  # type: ignore[attr-defined]
        jobs = jobs.filter(pk__in=[str(uuid.UUID(value)) for value in ids]).defer(*unread)
        return JsonResponse({"jobs": {job.pk: self._state(job, parts) for job in jobs}})

    def _state(self, job: Job, parts: list[str]) -> dict[str, Any]:
        progress = Progress.from_record(job.progress_state)
        return {
            "status": job.status,
            "running": job.status == JobStatus.RUNNING,
            "progress": None if progress is None else progress.as_record(),
            "parts": {part: str(self._render(job, part)) for part in parts},
        }


def _problem(ids: list[str], parts: list[str]) -> str:
    """Why a progress request cannot be answered, or '' if it can."""
    if not ids:
        return "Pass the jobs as id=<job id>, one or more."
    if len(ids) > MAX_IDS:
        return f"Ask for at most {MAX_IDS} jobs at a time, not {len(ids)}."
    for value in ids:
        try:
            uuid.UUID(value)
        except ValueError:
            return f"{value!r} is not a job id."
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        return f"Unknown part {unknown[0]!r}: pass part= one of {', '.join(PARTS)}."
    return ""
