"""The job detail page: arguments and result (masked), the timeline, every failed attempt."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Q
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from ..models import Batch, Job, JobDependency, JobStatus
from . import dates, display
from .links import admin_url
from .masking import MASK, mask_value, masked_arguments, masked_job, masked_return_value


class JobDetailMixin:
    """The read-only fields of a job's page, shared by the job list and the dead letters."""

    @admin.display(description=_("unique key"))
    def unique_key_display(self, job: Job) -> str:
        if not job.unique_key:
            return "-"
        return MASK if masked_job(job.name) else job.unique_key

    @admin.display(description=_("concurrency key"))
    def concurrency_display(self, job: Job) -> str:
        """The key and its limit: how many jobs of the key may run at once."""
        if not job.concurrency_key:
            return "-"
        key = MASK if masked_job(job.name) else job.concurrency_key
        return format_html("{} ({})", key, _("at most %(n)s at once") % {"n": job.concurrency_limit})

    @admin.display(description=_("workflow"))
    def workflow_display(self, job: Job) -> str:
        """Its batch, the batch it is a callback of, the jobs it waits for, how many wait for it."""
        parts = []
        if job.batch_id:
            batch = Batch.objects.filter(pk=job.batch_id).first()
            parts.append(
                format_html(
                    "{} {} {}",
                    _("In batch"),
                    self._batch_link(batch) if batch else format_html("{} ({})", job.batch_id, _("deleted")),
                    display.copy_button(job.batch_id, _("Copy batch id")),
                )
            )
        callback_of = Batch.objects.filter(
            Q(on_success=job.pk) | Q(on_failure=job.pk) | Q(on_complete=job.pk)
        ).first()
        if callback_of is not None:
            parts.append(format_html("{} {}", _("Callback of batch"), self._batch_link(callback_of)))
        upstream = list(job.dependencies.values_list("upstream", "run_on_failure"))
        if upstream:
            statuses = dict(
                Job.objects.filter(pk__in=[pk for pk, _run in upstream]).values_list("pk", "status")
            )
            rows = [
                [
                    format_html('<a href="{}">{}</a>', admin_url(self, "change", pk, model="job"), pk)
                    if pk in statuses
                    else pk,
                    display.status_badge(statuses[pk]) if pk in statuses else _("deleted"),
                    _("runs anyway") if run else _("cancels this job"),
                ]
                for pk, run in upstream
            ]
            parts.append(display.table([_("Waits for"), _("Status"), _("If it fails")], rows))
        if job.has_dependents:
            waiting = JobDependency.objects.filter(upstream=job.pk).count()
            parts.append(_("%(n)s job(s) wait for this one.") % {"n": waiting})
        if not parts:
            return "-"
        return format_html("".join(["<p>{}</p>"] * len(parts)), *parts)

    def _batch_link(self, batch: Batch) -> str:
        url = admin_url(self, "change", batch.pk, model="batch")
        return format_html(
            '<a href="{}">{}</a> ({}/{})', url, batch, batch.succeeded + batch.failed, batch.total
        )

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

    @admin.display(description=_("id"))
    def id_display(self, job: Job) -> str:
        return format_html('<code class="dbjobs-id">{}</code> {}', job.pk, display.copy_button(job.pk))

    @admin.display(description=_("timeline"))
    def timeline(self, job: Job) -> str:
        """Every event of the job in time order, each with how long after the enqueue it came."""
        events = [
            (job.scheduled_for, _("Scheduled for (its schedule's due time)"), "", ""),
            (job.enqueued_at, _("Enqueued"), "", ""),
            (job.run_at, _("Due"), "", ""),
            (job.started_at, _("First started"), "", ""),
            (job.cancel_requested_at, _("Asked to stop (cancel)"), "", ""),
        ]
        for error in job.errors or []:
            label = _("Attempt %(n)s failed") % {"n": error.get("attempt", "?")}
            summary = display.short_text(error.get("summary", ""))
            events.append((error.get("at"), label, error.get("worker", ""), summary))
        events.append((job.last_attempted_at, _("Last attempt started"), job.worker or "", ""))
        if job.finished_at:
            finished = _("Finished: %(status)s") % {"status": job.get_status_display()}
            events.append((job.finished_at, finished, "", ""))
        # sorted() keeps the order above for equal times (enqueued, due, first started…);
        # an error record whose time is not a time goes last, as it was stored.
        timed = [(dates.parse(event[0]), *event) for event in events if event[0]]
        timed.sort(key=lambda event: (event[0] is None, event[0] or job.enqueued_at))
        rows = [
            [
                label,
                dates.moment(stored),
                dates.offset(at, job.enqueued_at),
                display.worker_id(worker),
                detail,
            ]
            for at, stored, label, worker, detail in timed
        ]
        if job.status == JobStatus.RUNNING:
            rows.append([_("Running now"), "", "", display.worker_id(job.worker or ""), ""])
        headers = [_("Event"), _("When"), _("After enqueue"), _("Worker"), _("Detail")]
        table = display.table(headers, rows)
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
                dates.moment(error.get("at")),
                display.worker_id(error.get("worker", "")),
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
