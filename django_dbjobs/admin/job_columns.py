"""The columns of the job lists: a full, selectable id, the job, its status and one "when"."""

from __future__ import annotations

import re

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _

from ..exceptions import JobCancelled
from ..models import Blocked, Job, JobStatus
from ..models.settling import DEPENDENCY_FAILED
from ..operations import unknown_jobs
from . import dates, display


def breakable(name: str) -> str:
    """A dotted name escaped, with a line-break opportunity after each dot and underscore; copied whole."""
    parts = re.split(r"(?<=[._])", name)
    return format_html_join(mark_safe("<wbr>"), "{}", ((part,) for part in parts))


#: The error classes of a cancelled job's last attempt: asked to stop, or a job it waited for failed.
CANCELLED = f"{JobCancelled.__module__}.{JobCancelled.__qualname__}"
CANCELLED_CLASSES = (CANCELLED, DEPENDENCY_FAILED)


def is_cancelled(job: Job) -> bool:
    """Whether a FAILED job stopped because it was cancelled."""
    return (
        job.status == JobStatus.FAILED
        and bool(job.errors)
        and (job.errors[-1].get("exception_class_path") in CANCELLED_CLASSES)
    )


def status_badge(job: Job) -> str:
    """The status, or what holds the job: no worker knows it, a concurrency key, a cancellation."""
    if unknown_jobs.is_waiting(job):
        return format_html(
            '<span class="dbjobs-status dbjobs-unknown">{}</span>', _("Waiting for a worker that knows it")
        )
    if job.status == JobStatus.READY and job.blocked == Blocked.CONCURRENCY:
        return format_html(
            '<span class="dbjobs-status dbjobs-waiting-slot" title="{}">{}</span>',
            _("At most %(n)s jobs of this key run at once.") % {"n": job.concurrency_limit},
            _("Waiting for a slot of %(key)s") % {"key": job.concurrency_key},
        )
    if job.status == JobStatus.READY and job.blocked == Blocked.AFTER:
        return format_html(
            '<span class="dbjobs-status dbjobs-waiting-slot" title="{}">{}</span>',
            _("Claimable once the jobs it waits for (or its batch, for a batch's callback) have finished."),
            _("Waiting for other jobs"),
        )
    if job.status == JobStatus.RUNNING and job.cancel_requested_at is not None:
        return format_html(
            '<span class="dbjobs-status dbjobs-stopping">{}</span>', _("Running, asked to stop")
        )
    if is_cancelled(job):
        return format_html('<span class="dbjobs-status dbjobs-cancelled">{}</span>', _("Cancelled"))
    return display.status_badge(job.status)


def waiting_for_a_worker(job: Job) -> str:
    """'dead-lettered in 52 min' for a READY job no worker knew; '' for any other job."""
    if not unknown_jobs.is_waiting(job):
        return ""
    deadline = unknown_jobs.dead_letter_at(job.enqueued_at)
    if deadline is None:
        return ""
    left = (deadline - timezone.now()).total_seconds()
    if left <= 0:
        return _("dead-lettered when a worker next picks it up")
    return format_html(
        "{} {}",
        _("dead-lettered in %(time)s unless a worker knows it, at") % {"time": display.seconds_text(left)},
        dates.moment(deadline),
    )


def tries(job: Job) -> str:
    return _("attempt %(n)s/%(max)s") % {"n": job.attempts, "max": job.max_attempts}


class JobColumnsMixin:
    """The lists' columns, narrow enough for 1280 px with both sidebars open; a job page's status too."""

    @admin.display(description=_("id"), ordering="pk")
    def id_column(self, job: Job) -> str:
        # Whole, not a link: one click selects it all (user-select), to paste into the search.
        # One line break, after the third hyphen: a UUID on two lines of 19 and 17 characters.
        return format_html(
            '<code class="dbjobs-id"><span>{}</span><wbr><span>{}</span></code>', job.pk[:19], job.pk[19:]
        )

    @admin.display(description=_("job"), ordering="name")
    def name_and_error(self, job: Job) -> str:
        """The job's name, and below it the start of its last error (three lines, all on hover).

        Only a failed job's error is its outcome: a job due again, running again or that
        succeeded since (a retry, or a retried dead letter) shows it as its previous attempt's.
        """
        if not job.last_error:
            return breakable(job.name)
        error = display.short_text(job.last_error)
        shown = error
        if job.status != JobStatus.FAILED and not unknown_jobs.is_waiting(job):
            shown = format_html("{} {}", _("previous attempt:"), error)
        return format_html(
            '{}<div class="dbjobs-error" title="{}"><span>{}</span></div>', breakable(job.name), error, shown
        )

    @admin.display(description=_("status"), ordering="status")
    def status_and_attempts(self, job: Job) -> str:
        return format_html(
            '{}<div class="dbjobs-when-label">{}</div>',
            status_badge(job),
            waiting_for_a_worker(job) or tries(job),
        )

    @admin.display(description=_("status"), ordering="status")
    def status_display(self, job: Job) -> str:
        waiting = waiting_for_a_worker(job)
        if not waiting:
            return status_badge(job)
        return format_html(
            '{}<div class="dbjobs-when-label">{}</div><div class="dbjobs-error">{}</div>',
            status_badge(job),
            waiting,
            job.last_error,
        )

    @admin.display(description=_("attempts"))
    def attempts_display(self, job: Job) -> str:
        return f"{job.attempts} / {job.max_attempts}"

    @admin.display(description=_("when"))
    def when(self, job: Job) -> str:
        """The moment that matters for the job's status; all of them on hover."""
        moments = [
            (_("Enqueued"), job.enqueued_at),
            (_("Due"), job.run_at),
            (_("Last attempt started"), job.last_attempted_at),
            (_("Finished"), job.finished_at),
        ]
        shown = {
            JobStatus.READY: (_("due"), job.run_at),
            JobStatus.RUNNING: (_("started"), job.last_attempted_at),
            JobStatus.SUCCESSFUL: (_("finished"), job.finished_at),
            JobStatus.FAILED: (_("failed"), job.finished_at),
        }.get(job.status, (_("enqueued"), job.enqueued_at))
        return dates.moments(shown, moments)
