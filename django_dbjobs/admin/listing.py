"""What keeps the job lists fast on a table of millions: capped counts and cheap filters."""

from __future__ import annotations

import datetime

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import Q
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.translation import gettext_lazy as _

from ..conf import settings
from ..models import Blocked, JobStatus, Queue
from .known_jobs import known_jobs

#: The admin counts matching rows up to this many, then says "more than".
COUNT_CAP = 10_000


class CappedCountPaginator(Paginator):
    """A paginator whose count reads at most COUNT_CAP + 1 rows, never the whole table."""

    @cached_property
    def count(self) -> int:
        return self.object_list.order_by().values("pk")[: COUNT_CAP + 1].count()

    @property
    def capped(self) -> bool:
        return self.count > COUNT_CAP


class FastListMixin:
    """ModelAdmin options for big tables: capped counts, no full count, no DISTINCT filters."""

    paginator = CappedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # a count per filter choice: a scan each
    list_per_page = 50


class QueueFilter(admin.SimpleListFilter):
    """Queues known without reading the jobs: DBJOBS_QUEUES, the jobs' own, paused ones."""

    title = _("queue")
    parameter_name = "queue"

    def lookups(self, request, model_admin):
        names = {settings.DEFAULT_QUEUE, *(settings.QUEUES or [])}
        names |= {job.options.queue for job in known_jobs().values() if job.options.queue}
        names |= set(Queue.objects.values_list("name", flat=True))
        if self.value():
            names.add(self.value())
        return [(name, name) for name in sorted(names)]

    def queryset(self, request, queryset):
        return queryset.filter(queue=self.value()) if self.value() else queryset


class FlowFilter(admin.SimpleListFilter):
    """Jobs flow control holds: waiting for a concurrency slot, or asked to stop while running."""

    title = _("flow control")
    parameter_name = "flow"

    def lookups(self, request, model_admin):
        return [
            ("waiting", _("Waiting for a concurrency slot")),
            ("after", _("Waiting for other jobs")),
            ("stopping", _("Running, asked to stop")),
        ]

    def queryset(self, request, queryset):
        if self.value() == "waiting":
            return queryset.filter(status=JobStatus.READY, blocked=Blocked.CONCURRENCY)
        if self.value() == "after":
            return queryset.filter(status=JobStatus.READY, blocked=Blocked.AFTER)
        if self.value() == "stopping":
            return queryset.filter(status=JobStatus.RUNNING, cancel_requested_at__isnull=False)
        return queryset


class JobNameFilter(admin.SimpleListFilter):
    """The jobs this process has registered (no SELECT DISTINCT over the table)."""

    title = _("job")
    parameter_name = "name"

    def lookups(self, request, model_admin):
        names = set(known_jobs())
        if self.value():
            names.add(self.value())
        return [(name, name) for name in sorted(names)]

    def queryset(self, request, queryset):
        return queryset.filter(name=self.value()) if self.value() else queryset


class PriorityFilter(admin.SimpleListFilter):
    title = _("priority")
    parameter_name = "priority"

    def lookups(self, request, model_admin):
        return [("high", _("Above 0")), ("normal", _("0")), ("low", _("Below 0"))]

    def queryset(self, request, queryset):
        condition = {"high": Q(priority__gt=0), "normal": Q(priority=0), "low": Q(priority__lt=0)}.get(
            self.value()
        )
        return queryset.filter(condition) if condition is not None else queryset


#: How far a job's id may run ahead of its enqueued_at (the web server's clock ahead of
#: the database's), and behind it (a Job prepared with prepare() and inserted later).
ID_CLOCK_AHEAD = datetime.timedelta(hours=1)
ID_CLOCK_BEHIND = datetime.timedelta(hours=1)


def id_floor(moment: datetime.datetime) -> str:
    """The smallest UUIDv7 text made at `moment`: job ids sort by the time they were made."""
    millis = max(int(moment.timestamp() * 1000), 0)
    text = f"{millis:012x}"
    return f"{text[:8]}-{text[8:12]}-0000-0000-000000000000"


def enqueued_id_range(params) -> tuple[str, str] | None:
    """Primary-key bounds for the date hierarchy's enqueued_at filter, or None without one.

    The date filter alone makes the database walk the primary key from the newest job
    back to the chosen day; bounds on the id let it start there.
    """
    try:
        year = int(params.get("enqueued_at__year", ""))
    except ValueError:
        return None
    try:
        month = int(params.get("enqueued_at__month") or 0)
        day = int(params.get("enqueued_at__day") or 0)
        if month and day:
            start = datetime.datetime(year, month, day)
            end = start + datetime.timedelta(days=1)
        elif month:
            start = datetime.datetime(year, month, 1)
            end = datetime.datetime(year + month // 12, month % 12 + 1, 1)
        else:
            start, end = datetime.datetime(year, 1, 1), datetime.datetime(year + 1, 1, 1)
    except (ValueError, OverflowError):
        return None
    zone = timezone.get_current_timezone()
    try:
        start, end = timezone.make_aware(start, zone), timezone.make_aware(end, zone)
        return id_floor(start - ID_CLOCK_BEHIND), id_floor(end + ID_CLOCK_AHEAD)
    except (ValueError, OverflowError):  # year 1 or 9999: no bounds, the filter still applies
        return None
