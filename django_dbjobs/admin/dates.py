"""Moments as every admin page shows them: Django's DATETIME_FORMAT in the active timezone, UTC on hover."""

from __future__ import annotations

import datetime

from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..cron.expression import zone
from ..exceptions import InvalidSchedule


def parse(value: datetime.datetime | str | None) -> datetime.datetime | None:
    """`value` as an aware datetime; ISO text (a job's error records) is parsed; None if it is not a time."""
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime.datetime):
        return None
    return value if timezone.is_aware(value) else timezone.make_aware(value, datetime.timezone.utc)


def local_text(value: datetime.datetime) -> str:
    """'Dec. 3, 2026, 8:04 a.m.' (the language's DATETIME_FORMAT) in the active timezone."""
    return formats.date_format(timezone.localtime(value), "DATETIME_FORMAT")


def utc_text(value: datetime.datetime) -> str:
    """'2026-12-03 07:04:14 UTC': to the second, for a title."""
    return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def zone_text(value: datetime.datetime, zone_name: str) -> str:
    """'2026-12-03 08:04:14 Europe/Paris'; '' if the zone is unknown."""
    try:
        return value.astimezone(zone(zone_name)).strftime(f"%Y-%m-%d %H:%M:%S {zone_name}")
    except InvalidSchedule:
        return ""


def moment(value: datetime.datetime | str | None, also_in: str | None = None) -> SafeString | str:
    """A <time> in the active timezone, its UTC time (and in `also_in`, a timezone name) on hover.

    '' for none; text that is not a time is shown as it is, escaped.
    """
    if not value:
        return ""
    parsed = parse(value)
    if parsed is None:
        return str(value)
    lines = [utc_text(parsed), *([zone_text(parsed, also_in)] if also_in else [])]
    return time_tag(parsed, "\n".join(line for line in lines if line))


def moments(shown: tuple[str, datetime.datetime | None], others: list[tuple[str, datetime.datetime | None]]):
    """A labelled moment ('finished Dec. 3, …'); its UTC time, then every other moment's, on hover."""
    label, value = shown
    if value is None:
        return "-"
    lines = [utc_text(value), *(f"{name}: {utc_text(when)}" for name, when in others if when is not None)]
    return format_html(
        '<span class="dbjobs-when-label">{}</span> {}', label, time_tag(value, "\n".join(lines))
    )


def time_tag(value: datetime.datetime, title: str) -> SafeString:
    """<time datetime="(UTC, ISO)" title="…">(in the active timezone)</time>."""
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.astimezone(datetime.timezone.utc).isoformat(timespec="seconds"),
        title,
        local_text(value),
    )


def offset(value: datetime.datetime | None, origin: datetime.datetime | None) -> str:
    """'+3.2 s' after `origin`, '−0.5 s' before it; '' without both, or at the same moment."""
    if value is None or origin is None:
        return ""
    seconds = (value - origin).total_seconds()
    if abs(seconds) < 0.05:
        return ""
    return ("−" if seconds < 0 else "+") + duration_text(abs(seconds))


def duration_text(seconds: float) -> str:
    """'4.2 s', '35 s', '2 min 5 s', '3 h 10 min', '2 d 3 h': precise enough to order a timeline."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    for size, unit, smaller, smaller_unit in (
        (86400, "d", 3600, "h"),
        (3600, "h", 60, "min"),
        (60, "min", 1, "s"),
    ):
        if whole >= size:
            rest = (whole % size) // smaller
            return f"{whole // size} {unit} {rest} {smaller_unit}" if rest else f"{whole // size} {unit}"
    return f"{whole} s"
