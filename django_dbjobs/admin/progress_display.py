"""How the admin shows a job's progress: a bar with its numbers, the note, the pace, the time left."""

from __future__ import annotations

from django.utils import formats, timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _

from ..models import Job, JobStatus
from ..models.progress import Progress
from . import dates, display
from .masking import MASK, mask_value, masked_job

#: How much of a note a list's row shows (all of it on hover and on the job's page).
LIST_NOTE = 40


def number(value: float) -> str:
    """'12,345' or '12.5': a count as people read it, grouped, without a trailing '.0'."""
    if float(value).is_integer():
        return formats.number_format(int(value), force_grouping=True)
    return formats.number_format(value, decimal_pos=1, force_grouping=True)


def amount(progress: Progress) -> str:
    """'40 of 100 (40%)', or '1,234 done' when the job gave no total."""
    if progress.total is None:
        return _("%(done)s done") % {"done": number(progress.done)}
    return _("%(done)s of %(total)s (%(percent)s%%)") % {
        "done": number(progress.done),
        "total": number(progress.total),
        "percent": progress.percent,
    }


def bar(fraction: float | None, label: str, muted: bool = False) -> str:
    """A <progress> bar (a progressbar to assistive technology), `label` its text; moving for None."""
    css = "dbjobs-bar dbjobs-muted" if muted else "dbjobs-bar"
    if fraction is None:  # indeterminate: no value at all
        return format_html('<progress class="{}" aria-label="{}">{}</progress>', css, label, label)
    return format_html(
        '<progress class="{}" max="100" value="{}" aria-label="{}">{}</progress>',
        css,
        round(fraction * 100, 1),
        label,
        label,
    )


def rate_text(rate: float | None) -> str:
    """'12.5 per second', '3 per minute', '2 per hour': the pace in the unit that reads best."""
    if not rate or rate <= 0:
        return ""
    if rate >= 1:
        return _("%(n)s per second") % {"n": number(round(rate, 1))}
    if rate * 60 >= 1:
        return _("%(n)s per minute") % {"n": number(round(rate * 60, 1))}
    return _("%(n)s per hour") % {"n": number(round(rate * 3600, 1))}


def time_left(progress: Progress) -> str:
    """'about 3 min left' at the pace so far; '' when it cannot tell (no total, no pace)."""
    eta = progress.eta
    if eta is None:
        return ""
    if eta < 1:
        return _("less than a second left")
    return _("about %(time)s left") % {"time": display.seconds_text(eta)}


def list_cell(job: Job) -> str:
    """A list's progress: the bar, the percentage (or the count) and the note's start; muted once the
    job no longer runs; nothing for a job that never reported, nor for one that succeeded (done is done)."""
    progress = Progress.from_record(job.progress_state)
    if progress is None or job.status == JobStatus.SUCCESSFUL:
        return ""
    running = job.status == JobStatus.RUNNING
    if progress.total is None:
        shown = _("%(done)s done") % {"done": number(progress.done)}
    else:
        shown = f"{progress.percent}%"
    parts = [format_html('<span class="dbjobs-progress-text">{}</span>', shown)]
    if running or progress.total is not None:  # as on the page: no bar moving forever
        parts.insert(0, format_html("{} ", bar(progress.fraction, amount(progress), not running)))
    if progress.note:
        parts.append(
            format_html(
                '<div class="dbjobs-when-label" title="{}">{}</div>',
                progress.note,
                display.short_text(progress.note, LIST_NOTE),
            )
        )
    css = "dbjobs-progress-cell" if running else "dbjobs-progress-cell dbjobs-finished"
    return format_html(
        '<div class="{}">{}</div>', css, format_html_join("", "{}", ((part,) for part in parts))
    )


def page_block(job: Job) -> str:
    """A job page's progress: the bar and numbers, the note, the pace, the time left, the last report."""
    progress = Progress.from_record(job.progress_state)
    running = job.status == JobStatus.RUNNING
    if progress is None:
        return _("No progress reported yet.") if running else "-"
    label = amount(progress)
    # A finished job's unknown total gets no bar: an indeterminate one moves forever.
    shown_bar = bar(progress.fraction, label, not running) if running or progress.total is not None else ""
    head = format_html(
        '<p class="dbjobs-progress-head">{} <strong class="dbjobs-progress-text">{}</strong></p>',
        shown_bar,
        label,
    )
    note = format_html('<p class="dbjobs-progress-note">{}</p>', progress.note) if progress.note else ""
    pace = [rate_text(progress.rate)]
    if running:
        pace.append(time_left(progress))
    else:
        pace.append(_("its last report before it finished") if job.finished_at else _("its last report"))
    if progress.at is not None:
        ago = (timezone.now() - progress.at).total_seconds()
        pace.append(
            format_html(
                "{} {} ({})",
                _("reported at"),
                dates.moment(progress.at),
                _("%(time)s ago") % {"time": display.seconds_text(ago)},
            )
        )
    shown = [part for part in pace if part]
    details = format_html(
        '<p class="dbjobs-when-label">{}</p>', format_html_join(" · ", "{}", ((part,) for part in shown))
    )
    return format_html("{}{}{}", head, note, details)


def checkpoint(job: Job) -> str:
    """The last checkpoint stored, as JSON; masked like the job's arguments."""
    if job.checkpoint_state is None:
        return _("No checkpoint stored.")
    return display.pretty_json(MASK if masked_job(job.name) else mask_value(job.checkpoint_state))
