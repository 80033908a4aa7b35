"""Small pieces of HTML the admin pages share: JSON, ages, statuses. Everything escaped."""

from __future__ import annotations

import datetime
import json
from typing import Any

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _

from ..models import JobStatus

STATUS_COLOURS = {
    JobStatus.READY: "#417690",
    JobStatus.RUNNING: "#c77c02",
    JobStatus.SUCCESSFUL: "#2e7d32",
    JobStatus.FAILED: "#ba2121",
}


def pretty_json(value: Any) -> str:
    """`value` as indented JSON in a <pre>, escaped."""
    text = (
        value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    )
    return format_html('<pre class="dbjobs-json">{}</pre>', text)


def status_badge(status: str) -> str:
    label = JobStatus(status).label if status in JobStatus.values else status
    return format_html(
        '<span class="dbjobs-status" style="color:{};font-weight:bold">{}</span>',
        STATUS_COLOURS.get(status, "inherit"),
        label,
    )


def seconds_text(seconds: float | None) -> str:
    """'45 s', '12 min', '3 h', '2 d'; '-' for none."""
    if seconds is None:
        return "-"
    seconds = max(seconds, 0)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size * 2 or (unit == "min" and seconds >= 60):
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def when(value: datetime.datetime | str | None) -> str:
    """A moment in the admin's timezone, to the second: '2026-12-01 15:17:28'; '' for none.

    Accepts the ISO text stored in a job's error records as well as datetimes.
    """
    if not value:
        return ""
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            return value
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return value.strftime("%Y-%m-%d %H:%M:%S")


def ago(moment: datetime.datetime | None, now: datetime.datetime | None = None) -> str:
    if moment is None:
        return "-"
    now = now or timezone.now()
    return _("%(duration)s ago") % {"duration": seconds_text((now - moment).total_seconds())}


def short_text(text: str, limit: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain admin-styled table; cells are escaped unless marked safe."""
    head = format_html_join("", "<th>{}</th>", ((header,) for header in headers))
    body = format_html_join(
        "", "<tr>{}</tr>", ((format_html_join("", "<td>{}</td>", ((cell,) for cell in row)),) for row in rows)
    )
    return format_html(
        '<table class="dbjobs-table"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>', head, body
    )
