"""What `manage.py dbjobs_schedules` shows of each schedule: next and last run, state, last error."""

from __future__ import annotations

import datetime
from typing import Any

from .cron import zone
from .exceptions import InvalidSchedule


def state(schedule) -> str:
    if schedule.removed_at is not None:
        return "removed from settings"
    if not schedule.enabled:
        return "disabled"
    return "enabled, cannot fire (see last_error)" if schedule.last_error else "enabled"


def schedule_rows(schedules, jobs) -> list[dict[str, Any]]:
    """One dict per schedule, JSON-ready, with a "display" dict of short texts for a table."""
    schedules = list(schedules.order_by("name"))
    last_ids = [s.last_job_id for s in schedules if s.last_job_id]
    statuses = dict(jobs.filter(pk__in=last_ids).values_list("pk", "status")) if last_ids else {}
    rows = []
    for schedule in schedules:
        last_status = statuses.get(schedule.last_job_id, "deleted") if schedule.last_job_id else None
        rows.append(
            {
                "name": schedule.name,
                "cron": schedule.cron,
                "timezone": schedule.timezone,
                "job": schedule.job,
                "queue": schedule.queue,
                "priority": schedule.priority,
                "enabled": schedule.enabled,
                "state": state(schedule),
                "defined_in": schedule.defined_in,
                "missed_runs": schedule.missed_runs,
                "next_due_at": _iso(schedule.next_due_at),
                "next_due_local": _local(schedule.next_due_at, schedule.timezone),
                "last_due_at": _iso(schedule.last_due_at),
                "last_job": (
                    {"id": schedule.last_job_id, "status": last_status} if schedule.last_job_id else None
                ),
                "last_error": schedule.last_error,
                "last_manual_job_id": schedule.last_manual_job_id,
                "last_manual_at": _iso(schedule.last_manual_at),
                "display": {
                    "name": schedule.name,
                    "cron": schedule.cron,
                    "timezone": schedule.timezone,
                    "next_local": _short(_local(schedule.next_due_at, schedule.timezone)),
                    "next_utc": _short(_iso(schedule.next_due_at)),
                    "last_utc": _short(_iso(schedule.last_due_at)),
                    "last_status": last_status or "-",
                    "state": state(schedule),
                },
            }
        )
    return rows


def _iso(value: datetime.datetime | None) -> str | None:
    return value.astimezone(datetime.timezone.utc).isoformat() if value else None


def _local(value: datetime.datetime | None, timezone: str) -> str | None:
    if value is None:
        return None
    try:
        return value.astimezone(zone(timezone)).isoformat()
    except InvalidSchedule:
        return None


def _short(iso: str | None) -> str:
    """'2026-05-01 02:30:00 +02:00' from ISO text; '-' for none."""
    if not iso:
        return "-"
    value = datetime.datetime.fromisoformat(iso)
    return value.strftime("%Y-%m-%d %H:%M:%S %z")[:-2] + ":" + value.strftime("%z")[-2:]
