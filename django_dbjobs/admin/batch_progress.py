"""A batch's jobs in one aggregate query: how many of each status, and the progress they reported, summed."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, FloatField, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Least
from django.utils.html import format_html
from django.utils.translation import gettext as _

from ..models import Job, JobStatus
from ..models.progress import Progress
from .progress_display import amount, bar, number

#: A job that reported a total (a JSON null is no total).
REPORTS_TOTAL = Q(progress_state__has_key="total") & ~Q(progress_state__total=None)


@dataclass(frozen=True, slots=True)
class StatusGroup:
    """The batch's jobs of one status: how many, how many reported a total, and their done and total."""

    jobs: int
    reporting: int = 0
    done: float = 0
    total: float = 0


def status_groups(batch_pk: str) -> dict[str, StatusGroup]:
    """The batch's jobs by status, with their reported progress summed: one query on the batch-jobs index."""
    total = Cast(KT("progress_state__total"), FloatField())
    done = Least(Cast(KT("progress_state__done"), FloatField()), total)  # no job counts past its total
    rows = (
        Job.objects.filter(batch=batch_pk)
        .values_list("status")
        .annotate(
            jobs=Count("*"),
            reporting=Count("pk", filter=REPORTS_TOTAL),
            done=Sum(done, filter=REPORTS_TOTAL),
            total=Sum(total, filter=REPORTS_TOTAL),
        )
        .order_by()
    )
    return {
        status: StatusGroup(jobs, reporting, done_sum or 0, total_sum or 0)
        for status, jobs, reporting, done_sum, total_sum in rows
    }


def summed(groups: dict[str, StatusGroup]) -> tuple[Progress | None, int, int]:
    """(done of total summed over the jobs that reported a total, how many did, how many jobs).

    A job that succeeded counts as complete, whatever it last reported.
    """
    done = total = 0.0
    reporting = jobs = 0
    for status, group in groups.items():
        jobs += group.jobs
        reporting += group.reporting
        total += group.total
        done += group.total if status == JobStatus.SUCCESSFUL else group.done
    if not reporting:
        return None, 0, jobs
    return Progress(done=done, total=total), reporting, jobs


def summed_html(groups: dict[str, StatusGroup]) -> str:
    """The bar and numbers of the batch's summed progress; a sentence when no job reported a total."""
    progress, reporting, jobs = summed(groups)
    if progress is None:
        return _("No job of this batch reported a total yet.")
    label = amount(progress)
    return format_html(
        '{} <strong class="dbjobs-progress-text">{}</strong><div class="dbjobs-when-label">{}</div>',
        bar(progress.fraction, label),
        label,
        _(
            "summed over the %(reporting)s of %(jobs)s jobs that reported a total; "
            "succeeded jobs count as complete"
        )
        % {"reporting": number(reporting), "jobs": number(jobs)},
    )
