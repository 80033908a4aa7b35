"""Moments as every admin page shows them: DATETIME_FORMAT to the second, active timezone, UTC on hover."""

from __future__ import annotations

import datetime
import re

from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

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


def with_seconds(date_format: str) -> str:
    """A Django date format with the seconds after the minutes: 'N j, Y, P' -> 'N j, Y, g:i:s a'.

    Jobs run seconds apart: a time to the minute cannot tell which came first. A format
    that shows seconds already is kept as it is.
    """
    tokens = re.findall(r"\\.|.", date_format, flags=re.DOTALL)  # a backslash escapes the next character
    if "s" in tokens:
        return date_format
    shown = []
    for index, token in enumerate(tokens):
        if token == "P":  # '8:04 a.m.', 'noon'
            token = "g:i:s a"
        elif token == "f":  # '8:04', '8'
            token = "g:i:s"
        elif token == "i":  # 'H:i', and Finnish 'G.i'
            separator = tokens[index - 1] if index and tokens[index - 1] in (":", ".") else ":"
            token = f"i{separator}s"
        shown.append(token)
    return "".join(shown)


#: The format characters of a time of day, and of a date (Django's date format).
TIME_CHARACTERS = frozenset("aAfgGhHiPsu")
DATE_CHARACTERS = frozenset("bdDEFjlLmMnNoSwWyYz")


def split_at_time(date_format: str) -> tuple[str, str]:
    """('N j, Y, ', 'g:i:s a'): a format's date part and time part; ('', format) if not in that order."""
    tokens = re.findall(r"\\.|.", date_format, flags=re.DOTALL)
    first = next((index for index, token in enumerate(tokens) if token in TIME_CHARACTERS), None)
    if not first or DATE_CHARACTERS.intersection(tokens[first:]):
        return "", date_format
    return "".join(tokens[:first]), "".join(tokens[first:])


def local_parts(value: datetime.datetime) -> tuple[str, str]:
    """('Dec. 3, 2026, ', '8:04:14 a.m.'): DATETIME_FORMAT to the second, in the active timezone."""
    local = timezone.localtime(value)
    date_part, time_part = split_at_time(with_seconds(formats.get_format("DATETIME_FORMAT")))
    return (formats.date_format(local, date_part) if date_part else ""), formats.date_format(local, time_part)


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
    """<time datetime="(UTC, ISO)" title="…">(in the active timezone)</time>.

    The date and the time are each kept on one line (a span each), so that a narrow
    column shows the moment on two lines at most, never a word or a number per line.
    """
    date_text, time_text = local_parts(value)
    date_head = date_text.rstrip()
    gap = date_text[len(date_head) :]
    shown = (
        format_html("<span>{}</span>{}<span>{}</span>", date_head, gap or mark_safe("<wbr>"), time_text)
        if date_head
        else format_html("<span>{}</span>", time_text)
    )
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.astimezone(datetime.timezone.utc).isoformat(timespec="seconds"),
        title,
        shown,
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
