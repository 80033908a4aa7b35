"""What keeps the job lists fast on a table of millions: capped counts and cheap filters."""

from __future__ import annotations

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import Q
from django.utils.functional import cached_property
from django.utils.translation import gettext_lazy as _

from .. import registry
from ..conf import settings
from ..models import Queue

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
        names |= {job.options.queue for job in registry.registered().values() if job.options.queue}
        names |= set(Queue.objects.values_list("name", flat=True))
        if self.value():
            names.add(self.value())
        return [(name, name) for name in sorted(names)]

    def queryset(self, request, queryset):
        return queryset.filter(queue=self.value()) if self.value() else queryset


class JobNameFilter(admin.SimpleListFilter):
    """The jobs this process has registered (no SELECT DISTINCT over the table)."""

    title = _("job")
    parameter_name = "name"

    def lookups(self, request, model_admin):
        registry.autodiscover()
        names = set(registry.registered())
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
