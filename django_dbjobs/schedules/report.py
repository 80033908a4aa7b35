"""What `manage.py dbjobs_schedules` shows of each schedule: next and last run, state, last error.

The table holds a DBJOBS_SCHEDULES entry once a worker has started and synced it; until
then (and after the setting changed) the report shows the setting's own definition, with
the state saying it is not synced yet.
"""

from __future__ import annotations

import datetime
from typing import Any

from django.utils import timezone

from ..conf import settings
from ..cron.expression import Cron, zone
from ..exceptions import DbJobsError, InvalidSchedule
from ..models import DefinedIn, Schedule
from ..models.schedule import default_timezone
from .definitions import settings_changes, settings_definitions

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

    DBJOBS_SCHEDULES entries not in the table yet are included as the setting defines
    them, and a synced one whose setting changed since says so (state).
    """
    schedules = list(schedules.order_by("name"))
    last_ids = [s.last_job_id for s in schedules if s.last_job_id]
    statuses = dict(jobs.filter(pk__in=last_ids).values_list("pk", "status")) if last_ids else {}
    changed = _changed_in_settings(schedules)
    rows = []
    for schedule in schedules:
        last_status = statuses.get(schedule.last_job_id, "deleted") if schedule.last_job_id else None
        pending = f"; changed in DBJOBS_SCHEDULES, {NOT_SYNCED}" if schedule.name in changed else ""
        rows.append(_row(schedule, state(schedule) + pending, last_status))
    synced = {schedule.name for schedule in schedules}
    rows += [_row(schedule, unsynced_state) for schedule, unsynced_state in _unsynced(synced)]
    return sorted(rows, key=lambda row: row["name"])


def _unsynced(synced: set[str]):
    """Each DBJOBS_SCHEDULES entry not in the table yet, as an unsaved Schedule, and its state."""
    entries = settings.SCHEDULES if isinstance(settings.SCHEDULES, dict) else {}
    for name, definition in entries.items():
        if name in synced or not isinstance(definition, dict):
            continue
        schedule = Schedule(
            name=name,
            defined_in=DefinedIn.SETTINGS,
            enabled=definition.get("enabled", True),
            **{
                key: definition[key]
                for key in ("job", "cron", "queue", "priority", "missed_runs")
                if key in definition
            },
            timezone=definition.get("timezone") or default_timezone(),  # as the sync does
        )
        try:
            schedule.next_due_at = Cron(schedule.cron, schedule.timezone).next_after(timezone.now())
            yield schedule, NOT_SYNCED
        except (DbJobsError, TypeError) as exc:
            yield schedule, f"{NOT_SYNCED}; cannot fire: {exc}"


def _changed_in_settings(schedules) -> set[str]:
    """Names of synced settings schedules whose DBJOBS_SCHEDULES entry has changed since."""
    try:
        wanted = settings_definitions()
    except DbJobsError:  # an invalid setting: the system check says what, and no worker syncs it
        return set()
    return {s.name for s in schedules if s.name in wanted and settings_changes(s, wanted[s.name])}


def _row(schedule, shown_state: str, last_status: str | None = None) -> dict[str, Any]:
    return {
        "name": schedule.name,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "job": schedule.job,
        "queue": schedule.queue,
        "priority": schedule.priority,
        "enabled": schedule.enabled,
        "state": shown_state,
        "defined_in": schedule.defined_in,
        "missed_runs": schedule.missed_runs,
        "next_due_at": _iso(schedule.next_due_at),
        "next_due_local": _local(schedule.next_due_at, schedule.timezone),
        "last_due_at": _iso(schedule.last_due_at),
        "last_job": {"id": schedule.last_job_id, "status": last_status} if schedule.last_job_id else None,
        "last_error": schedule.last_error,
        "last_manual_job_id": schedule.last_manual_job_id,
        "last_manual_at": _iso(schedule.last_manual_at),
        "display": {
            "name": schedule.name,
            "cron": str(schedule.cron),
            "timezone": str(schedule.timezone),
            "next_local": _short(_local(schedule.next_due_at, schedule.timezone)),
            "next_utc": _short(_iso(schedule.next_due_at)),
            "last_utc": _short(_iso(schedule.last_due_at)),
            "last_status": last_status or "-",
            "state": shown_state,
        },
    }


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
