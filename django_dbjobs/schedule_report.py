"""What `manage.py dbjobs_schedules` shows of each schedule: next and last run, state, last error.

The table holds a DBJOBS_SCHEDULES entry once a worker has started and synced it; until
then (and after the setting changed) the report shows the setting's own definition, with
the state saying it is not synced yet.
"""

from __future__ import annotations

import datetime
from typing import Any

from django.utils import timezone

from .conf import settings
from .cron import Cron, zone
from .exceptions import DbJobsError, InvalidSchedule

#: The state of a DBJOBS_SCHEDULES entry no worker has synced into the table yet.
NOT_SYNCED = "not synced yet: a worker syncs DBJOBS_SCHEDULES when it starts"


def state(schedule) -> str:
    if schedule.removed_at is not None:
        return "removed from settings"
    if not schedule.enabled:
        return "disabled"
    return "enabled, cannot fire (see last_error)" if schedule.last_error else "enabled"


def schedule_rows(schedules, jobs) -> list[dict[str, Any]]:
    """One dict per schedule, JSON-ready, with a "display" dict of short texts for a table.

    Schedules of DBJOBS_SCHEDULES that are not in the table yet are included, as the
    setting defines them (see unsynced_rows()).
    """
    schedules = list(schedules.order_by("name"))
    rows = _table_rows(schedules, jobs)
    changed = _changed_in_settings(schedules)
    for row in rows:
        if row["name"] in changed:
            row["state"] = row["display"]["state"] = (
                f"{row['state']}; changed in DBJOBS_SCHEDULES, {NOT_SYNCED}"
            )
    rows.extend(unsynced_rows({schedule.name for schedule in schedules}))
    return sorted(rows, key=lambda row: row["name"])


def unsynced_rows(synced: set[str]) -> list[dict[str, Any]]:
    """One row per DBJOBS_SCHEDULES entry not in the table yet, its next run worked out from its cron."""
    entries = settings.SCHEDULES if isinstance(settings.SCHEDULES, dict) else {}
    rows = []
    for name, definition in entries.items():
        if name in synced or not isinstance(definition, dict):
            continue
        cron, zone_name = definition.get("cron"), definition.get("timezone") or "UTC"
        state = NOT_SYNCED
        try:
            next_due = Cron(cron, zone_name).next_after(timezone.now())
        except (DbJobsError, TypeError) as exc:
            next_due, state = None, f"{NOT_SYNCED}; cannot fire: {exc}"
        rows.append(
            {
                "name": name,
                "cron": cron,
                "timezone": zone_name,
                "job": definition.get("job"),
                "queue": definition.get("queue"),
                "priority": definition.get("priority"),
                "enabled": definition.get("enabled", True),
                "state": state,
                "defined_in": "settings",
                "missed_runs": definition.get("missed_runs", "latest"),
                "next_due_at": _iso(next_due),
                "next_due_local": _local(next_due, zone_name),
                "last_due_at": None,
                "last_job": None,
                "last_error": "",
                "last_manual_job_id": None,
                "last_manual_at": None,
                "display": {
                    "name": name,
                    "cron": str(cron),
                    "timezone": str(zone_name),
                    "next_local": _short(_local(next_due, zone_name)),
                    "next_utc": _short(_iso(next_due)),
                    "last_utc": "-",
                    "last_status": "-",
                    "state": state,
                },
            }
        )
    return rows


def _changed_in_settings(schedules) -> set[str]:
    """Names of synced settings schedules whose DBJOBS_SCHEDULES entry has changed since."""
    from .schedules import settings_definitions

    try:
        wanted = settings_definitions()
    except DbJobsError:  # an invalid setting: the system check says what, and no worker syncs it
        return set()
    return {
        schedule.name
        for schedule in schedules
        if schedule.name in wanted
        and any(getattr(schedule, field) != value for field, value in wanted[schedule.name].items())
    }


def _table_rows(schedules, jobs) -> list[dict[str, Any]]:
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
