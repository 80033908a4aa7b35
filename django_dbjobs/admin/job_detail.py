"""The job detail page: arguments and result (masked), the timeline, every failed attempt."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from ..models import Job, JobStatus
from . import display
from .masking import MASK, mask_value, masked_arguments, masked_job, masked_return_value


class JobDetailMixin:
    """The read-only fields of a job's page, shared by the job list and the dead letters."""

    @admin.display(description=_("unique key"))
    def unique_key_display(self, job: Job) -> str:
        if not job.unique_key:
            return "-"
        return MASK if masked_job(job.name) else job.unique_key

    @admin.display(description=_("arguments"))
    def arguments(self, job: Job) -> str:
        args, kwargs = masked_arguments(job.name, job.args, job.kwargs)
        return format_html(
            "<strong>args</strong>{}<strong>kwargs</strong>{}",
            display.pretty_json(args),
            display.pretty_json(kwargs),
        )

    @admin.display(description=_("enqueuer's context"))
    def context_display(self, job: Job) -> str:
        """Language, timezone and DBJOBS_CONTEXT_CAPTURE data of the code that enqueued the job."""
        if not job.context:
            return "-"
        return display.pretty_json(MASK if masked_job(job.name) else mask_value(job.context))

    @admin.display(description=_("return value"))
    def return_value_display(self, job: Job) -> str:
        if job.status != JobStatus.SUCCESSFUL:
            return "-"
        return display.pretty_json(masked_return_value(job.name, job.return_value))

    @admin.display(description=_("timeline"))
    def timeline(self, job: Job) -> str:
        rows = [[_("Enqueued"), display.when(job.enqueued_at), "", ""]]
        if job.scheduled_for:
            rows.append(
                [_("Scheduled for (its schedule's due time)"), display.when(job.scheduled_for), "", ""]
            )
        rows.append([_("Due"), display.when(job.run_at), "", ""])
        if job.started_at:
            rows.append([_("First started"), display.when(job.started_at), "", ""])
        for error in job.errors or []:
            rows.append(
                [
                    _("Attempt %(n)s failed") % {"n": error.get("attempt", "?")},
                    display.when(error.get("at")),
                    error.get("worker", ""),
                    display.short_text(error.get("summary", "")),
                ]
            )
        if job.last_attempted_at:
            rows.append(
                [_("Last attempt started"), display.when(job.last_attempted_at), job.worker or "", ""]
            )
        if job.status == JobStatus.RUNNING:
            rows.append([_("Running now"), "", job.worker or "", ""])
        if job.finished_at:
            finished = _("Finished: %(status)s") % {"status": job.get_status_display()}
            rows.append([finished, display.when(job.finished_at), "", ""])
        table = display.table([_("Event"), _("When"), _("Worker"), _("Detail")], rows)
        if job.worker_ids:
            table += format_html(
                "<p>{}: {}</p>", _("Worker of each attempt since the last retry"), ", ".join(job.worker_ids)
            )
        return table

    @admin.display(description=_("errors"))
    def attempts_table(self, job: Job) -> str:
        errors = job.errors or []
        if not errors:
            return _("No failed attempts.")
        rows = [
            [
                error.get("attempt", "?"),
                display.when(error.get("at")),
                error.get("worker", ""),
                format_html(
                    '<strong>{}</strong><details><summary>{}</summary><pre class="dbjobs-traceback">{}</pre>'
                    "</details>",
                    error.get("summary", ""),
                    _("Traceback"),
                    error.get("traceback", "") or _("(none recorded)"),
                ),
            ]
            for error in reversed(errors)
        ]
        return display.table([_("Attempt"), _("At"), _("Worker"), _("Error")], rows)
