"""Template tags of the django_dbjobs admin pages."""

from __future__ import annotations

import calendar
import datetime

import django
from django import template
from django.utils import formats, timezone
from django.utils.text import capfirst
from django.utils.translation import gettext as _

from ..models import Job

register = template.Library()


def _bounds() -> tuple[datetime.date, datetime.date] | None:
    """The dates of the oldest and newest job, from two reads of the primary key index.

    Job ids are UUIDv7, ordered by enqueue time: no scan of enqueued_at is needed.
    """
    jobs = Job.objects.order_by("pk").values_list("enqueued_at", flat=True)
    first, last = jobs.first(), jobs.reverse().first()
    if first is None or last is None:
        return None
    first, last = timezone.localtime(first).date(), timezone.localtime(last).date()
    return min(first, last), max(first, last)


@register.inclusion_tag("admin/date_hierarchy.html")
def dbjobs_date_hierarchy(cl):
    """Django's date drill-down, with links made from the table's first and last dates.

    Django's own asks the database for the distinct years, months and days of the
    listed rows: a scan of the whole table on every page load. These links cover
    every period between the oldest and the newest job, some possibly empty.
    """
    field = cl.date_hierarchy
    year_field, month_field, day_field = f"{field}__year", f"{field}__month", f"{field}__day"
    year, month, day = (cl.params.get(name) for name in (year_field, month_field, day_field))
    verbose = Job._meta.get_field(field).verbose_name

    def link(filters):
        return cl.get_query_string(filters, [f"{field}__"])

    bounds = _bounds()
    if bounds is None:
        return {"show": False}
    first, last = bounds
    try:
        year, month, day = (int(value) if value else None for value in (year, month, day))
    except (TypeError, ValueError):
        return {"show": False}
    if year is None and first.year == last.year:
        year = first.year
        if first.month == last.month:
            month = first.month
    if year and month and day:
        when = datetime.date(year, month, day)
        return {
            "show": True,
            "back": {
                "link": link({year_field: year, month_field: month}),
                "title": capfirst(formats.date_format(when, "YEAR_MONTH_FORMAT")),
            },
            "choices": [{"title": capfirst(formats.date_format(when, "MONTH_DAY_FORMAT"))}],
            "field_name": verbose,
        }
    if year and month:
        days = [datetime.date(year, month, n) for n in range(1, calendar.monthrange(year, month)[1] + 1)]
        return {
            "show": True,
            "back": {"link": link({year_field: year}), "title": str(year)},
            "choices": [
                {
                    "link": link({year_field: year, month_field: month, day_field: when.day}),
                    "title": capfirst(formats.date_format(when, "MONTH_DAY_FORMAT")),
                }
                for when in days
                if first <= when <= last
            ],
            "field_name": verbose,
        }
    if year:
        months = [datetime.date(year, n, 1) for n in range(1, 13)]
        return {
            "show": True,
            "back": {"link": link({}), "title": _("All dates")},
            "choices": [
                {
                    "link": link({year_field: year, month_field: when.month}),
                    "title": capfirst(formats.date_format(when, "YEAR_MONTH_FORMAT")),
                }
                for when in months
                if (first.year, first.month) <= (year, when.month) <= (last.year, last.month)
            ],
            "field_name": verbose,
        }
    return {
        "show": True,
        "back": None,
        "choices": [
            {"link": link({year_field: when}), "title": str(when)}
            for when in range(first.year, last.year + 1)
        ],
        "field_name": verbose,
    }


@register.simple_tag
def dbjobs_count(cl) -> str:
    """The number of matching rows, or "more than N" when the capped count ran out."""
    paginator = cl.paginator
    if getattr(paginator, "capped", False):
        from ..admin.listing import COUNT_CAP

        return _("more than %(count)s") % {"count": formats.number_format(COUNT_CAP, force_grouping=True)}
    return formats.number_format(cl.result_count, force_grouping=True)


@register.simple_tag
def dbjobs_admin_markup() -> str:
    """ "6" for the admin markup of Django 6 (<ol class="breadcrumbs">, <nav class="paginator">), else "5"."""
    return "6" if django.VERSION >= (6, 0) else "5"


@register.simple_tag
def dbjobs_import_errors() -> list[str]:
    """One sentence per job module that failed to import: the banner of the job and schedule pages."""
    from ..admin.known_jobs import import_error_messages

    return import_error_messages()
