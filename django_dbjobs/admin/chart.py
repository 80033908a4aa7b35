"""The overview's chart: jobs finished per minute, drawn server-side as inline SVG."""

from __future__ import annotations

import datetime

from django.utils import formats, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from ..operations.queue_stats import Minute

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 180, 40, 20, 10
SUCCEEDED_COLOUR, FAILED_COLOUR = "#2e7d32", "#ba2121"


def clock(moment: datetime.datetime) -> str:
    """The time of day in the language's TIME_FORMAT and the active timezone, as the dates elsewhere."""
    return formats.time_format(timezone.localtime(moment), "TIME_FORMAT")


def throughput_svg(minutes: list[Minute]) -> SafeString:
    """Stacked bars, one per minute: succeeded below, failed above; a <title> on each bar."""
    peak = max((minute.succeeded + minute.failed for minute in minutes), default=0)
    scale_top = max(peak, 1)
    plot_height = HEIGHT - BOTTOM - TOP
    slot = (WIDTH - LEFT) / max(len(minutes), 1)
    bars = []
    for index, minute in enumerate(minutes):
        x = LEFT + index * slot
        succeeded_height = plot_height * minute.succeeded / scale_top
        failed_height = plot_height * minute.failed / scale_top
        label = _("%(time)s: %(succeeded)d succeeded, %(failed)d failed") % {
            "time": clock(minute.at),
            "succeeded": minute.succeeded,
            "failed": minute.failed,
        }
        base = HEIGHT - BOTTOM
        bars.append(
            (
                f"{x:.1f}",
                f"{max(slot - 1, 1):.1f}",
                f"{base - succeeded_height:.1f}",
                f"{succeeded_height:.1f}",
                SUCCEEDED_COLOUR,
                f"{base - succeeded_height - failed_height:.1f}",
                f"{failed_height:.1f}",
                FAILED_COLOUR,
                label,
            )
        )
    rects = format_html_join(
        "",
        '<g><title>{8}</title><rect x="{0}" width="{1}" y="{2}" height="{3}" fill="{4}"/>'
        '<rect x="{0}" width="{1}" y="{5}" height="{6}" fill="{7}"/></g>',
        bars,
    )
    first = clock(minutes[0].at) if minutes else ""
    last = clock(minutes[-1].at) if minutes else ""
    return format_html(
        '<svg class="dbjobs-chart" role="img" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
        'xmlns="http://www.w3.org/2000/svg" aria-label="{aria}">'
        '<line x1="{left}" y1="{base}" x2="{w}" y2="{base}" stroke="#999"/>'
        '<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#999"/>'
        '<text x="{labelx}" y="{topy}" font-size="11" text-anchor="end" fill="currentColor">{peak}</text>'
        '<text x="{labelx}" y="{base}" font-size="11" text-anchor="end" fill="currentColor">0</text>'
        '<text x="{left}" y="{timey}" font-size="11" fill="currentColor">{first}</text>'
        '<text x="{w}" y="{timey}" font-size="11" text-anchor="end" fill="currentColor">{last}</text>'
        "{rects}</svg>",
        w=WIDTH,
        h=HEIGHT,
        left=LEFT,
        top=TOP,
        base=HEIGHT - BOTTOM,
        labelx=LEFT - 4,
        timey=HEIGHT - 4,  # room below the baseline: "p.m." has descenders
        topy=TOP + 8,
        peak=peak,
        first=first,
        last=last,
        rects=rects,
        aria=_("Jobs finished per minute over the last hour: %(total)d succeeded, %(failed)d failed")
        % {"total": sum(m.succeeded for m in minutes), "failed": sum(m.failed for m in minutes)},
    )
