"""Small pieces of HTML the admin pages share: JSON, ages, statuses, tables. Everything escaped."""

from __future__ import annotations

import json
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
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


def copy_button(value: str, label: str | None = None) -> str:
    """A small Copy button for `value`, hidden until static/django_dbjobs/copy.js finds a clipboard."""
    return format_html(
        '<button type="button" class="button dbjobs-copy" data-copy="{}" data-copied="{}" hidden>{}</button>',
        value,
        _("Copied"),
        label or _("Copy"),
    )


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


def worker_id(value: str) -> str:
    """A worker's id (``host:pid:random``) that wraps only after a colon, never inside a part:
    a table's narrow column would otherwise split its hex ("1be07d5 4")."""
    if not value:
        return ""
    parts = format_html_join(mark_safe(":<wbr>"), "{}", ((part,) for part in value.split(":")))
    return format_html('<span class="dbjobs-id">{}</span>', parts)
