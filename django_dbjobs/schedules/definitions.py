"""Schedule definitions: validating them, and syncing DBJOBS_SCHEDULES into the Schedule table.

A definition is what a DBJOBS_SCHEDULES entry holds (``{"job": ..., "cron": ...}``); a
Schedule row made in code holds the same fields. Both are checked
here, by the same rules, before anything is saved.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from .. import registry
from ..conf import settings
from ..cron.expression import Cron, zone
from ..enqueuing import validation
from ..exceptions import InvalidJob, InvalidSchedule
from ..models import DefinedIn, MissedRuns, Schedule
from ..models.schedule import DEFAULT_CATCH_UP_WINDOW, default_timezone
from ..observability import log_fields

logger = logging.getLogger("django_dbjobs")

#: The keys a DBJOBS_SCHEDULES entry may have; "job" and "cron" are required.
KEYS = (
    "job",
    "cron",
    "timezone",
    "args",
    "kwargs",
    "queue",
    "priority",
    "max_attempts",
    "enabled",
    "missed_runs",
    "catch_up_window",
    "no_overlap",
    "due_time_argument",
)


def definition_errors(definition: dict[str, Any]) -> dict[str, str]:
    """Check a schedule definition; return {field: message} for each problem (empty when valid)."""
    errors: dict[str, str] = {}

    def check(field: str, test) -> Any:
        try:
            return test()
        except (InvalidSchedule, InvalidJob) as exc:
            errors[field] = str(exc)
            return None

    zone_name, cron_text = definition.get("timezone") or "UTC", definition.get("cron")
    check("timezone", lambda: _short_text(zone_name, "timezone", 64) and zone(zone_name))
    # A bad timezone must not hide a bad expression: read it in UTC then, to report both.
    cron_zone = "UTC" if "timezone" in errors else zone_name
    check("cron", lambda: _short_text(cron_text, "cron", 120) and Cron(cron_text, cron_zone))
    job = check("job", lambda: _registered(definition.get("job")))
    due_argument = definition.get("due_time_argument") or ""
    kwargs = definition.get("kwargs", {})
    if not isinstance(due_argument, str) or (due_argument and not due_argument.isidentifier()):
        errors["due_time_argument"] = f"due_time_argument must be an argument name, not {due_argument!r}."
    elif len(due_argument) > 100:
        errors["due_time_argument"] = "due_time_argument must be at most 100 characters."
    elif due_argument and isinstance(kwargs, dict):
        if due_argument in kwargs:
            errors["due_time_argument"] = f"{due_argument!r} is also given in kwargs."
        kwargs = {**kwargs, due_argument: "2000-01-01T00:00:00.000000+00:00"}  # as long as a real one
    reject_nul = True  # the strictest database's rule: a definition may move between databases
    payload = check("args", lambda: validation.payload(_list(definition.get("args", [])), kwargs, reject_nul))
    if job is not None and payload is not None:
        check("args", lambda: job.check_arguments(*payload))
    if definition.get("queue") is not None:
        check("queue", lambda: validation.queue(definition["queue"]))
    if definition.get("priority") is not None:
        check("priority", lambda: validation.priority(definition["priority"]))
    if definition.get("max_attempts") is not None:
        check("max_attempts", lambda: validation.max_attempts(_below_2_31(definition["max_attempts"])))
    if definition.get("missed_runs", MissedRuns.LATEST) not in MissedRuns.values:
        errors["missed_runs"] = (
            f"missed_runs must be one of {', '.join(MissedRuns.values)}, not {definition['missed_runs']!r}."
        )
    window = definition.get("catch_up_window", DEFAULT_CATCH_UP_WINDOW)
    if isinstance(window, bool) or not isinstance(window, int) or not 0 <= window < 2**31:
        errors["catch_up_window"] = (
            f"catch_up_window must be a whole number of seconds, 0 or more, not {window!r}."
        )
    for flag in ("enabled", "no_overlap"):
        if flag in definition and not isinstance(definition[flag], bool):
            errors[flag] = f"{flag} must be True or False, not {definition[flag]!r}."
    return errors


def _short_text(value: Any, name: str, limit: int) -> bool:
    if isinstance(value, str) and len(value) > limit:
        raise InvalidSchedule(f"{name} must be at most {limit} characters.")
    return True


def _below_2_31(value: Any) -> Any:
    if isinstance(value, int) and value >= 2**31:
        raise InvalidJob(f"max_attempts must be below 2**31, not {value}.")
    return value


def _registered(name: Any):
    if not isinstance(name, str) or not name:
        raise InvalidJob(f"job must be the dotted name of a registered job, not {name!r}.")
    _short_text(name, "job", 255)
    if registry.lookup(name) is None and registry.discovered_with_errors()[1]:
        # get() would import the broken module again and raise its error (check dbjobs.E032 names it).
        raise InvalidJob(
            f"job {name!r} is not registered, and cannot be looked for while a job module fails to import."
        )
    return registry.get(name)  # imports the job modules only when the name is not registered yet


def _list(args: Any) -> list:
    if not isinstance(args, list | tuple):
        raise InvalidJob(f"args must be a list of positional arguments, not {args!r}.")
    return list(args)


def settings_problems() -> list[str]:
    """Every problem of DBJOBS_SCHEDULES, each naming its schedule (the system check shows them)."""
    schedules = settings.SCHEDULES
    if not isinstance(schedules, dict):
        return [f"DBJOBS_SCHEDULES must be a dict of schedule name -> definition, not {schedules!r}."]
    problems = []
    if schedules and not django_settings.USE_TZ:
        problems.append("DBJOBS_SCHEDULES needs USE_TZ = True: due times are stored in UTC.")
    for name, definition in schedules.items():
        where = f"DBJOBS_SCHEDULES[{name!r}]"
        if not isinstance(name, str) or not 1 <= len(name) <= 100:
            problems.append(f"{where}: a schedule name must be a string of 1 to 100 characters.")
            continue
        if not isinstance(definition, dict):
            example = "{'job': 'app.jobs.report', 'cron': '0 3 * * *'}"
            problems.append(f"{where} must be a dict such as {example}.")
            continue
        unknown = sorted(set(definition) - set(KEYS))
        if unknown:
            names = ", ".join(map(repr, unknown))
            problems.append(f"{where} has unknown keys {names}; the keys are {', '.join(KEYS)}.")
        missing = [key for key in ("job", "cron") if key not in definition]
        if missing:
            problems.append(f"{where} lacks {' and '.join(map(repr, missing))}.")
        problems.extend(
            f"{where}[{field!r}]: {message}" for field, message in definition_errors(definition).items()
        )
    return problems


def settings_definitions() -> dict[str, dict[str, Any]]:
    """DBJOBS_SCHEDULES as Schedule field values, every default filled in; InvalidSchedule if invalid."""
    problems = settings_problems()
    if problems:
        raise InvalidSchedule(" ".join(problems))
    result = {}
    for name, definition in settings.SCHEDULES.items():
        args, kwargs = validation.payload(
            list(definition.get("args", [])), definition.get("kwargs", {}), True
        )
        result[name] = {
            "job": definition["job"],
            "cron": definition["cron"],
            "timezone": definition.get("timezone") or default_timezone(),
            "args": args,
            "kwargs": kwargs,
            "queue": definition.get("queue"),
            "priority": definition.get("priority"),
            "max_attempts": definition.get("max_attempts"),
            "missed_runs": definition.get("missed_runs", MissedRuns.LATEST),
            "catch_up_window": definition.get("catch_up_window", DEFAULT_CATCH_UP_WINDOW),
            "no_overlap": definition.get("no_overlap", False),
            "due_time_argument": definition.get("due_time_argument") or "",
            "settings_enabled": definition.get("enabled", True),
        }
    return result


def sync_settings(using: str = "default") -> None:
    """Create and update the schedules of DBJOBS_SCHEDULES; retire those no longer in it.

    Run by every worker as it starts, so several may run at once: each row is written
    on its own, a creation lost to another worker is read back, and updates are the
    same whoever writes them. An operator's enable/disable stands unless the setting's
    own ``enabled`` changed. A retired schedule keeps its row and ticks, and fires no more.
    """
    wanted = settings_definitions()
    rows = Schedule.objects.using(using)
    for name, fields in wanted.items():
        for _ in range(3):
            schedule = rows.filter(name=name).first()
            if schedule is not None:
                _update(schedule, fields, using)
                break
            try:
                with transaction.atomic(using=using):
                    _create(name, fields, using)
                break
            except IntegrityError:
                continue  # another worker created it first: update theirs
    retired = rows.filter(defined_in=DefinedIn.SETTINGS, removed_at=None).exclude(name__in=list(wanted))
    for schedule in retired:
        schedule.removed_at = timezone.now()
        schedule.save(using=using)
        logger.warning(
            "Schedule retired: no longer in DBJOBS_SCHEDULES name=%s (kept with its history)",
            schedule.name,
            extra=log_fields.for_schedule(schedule.name),
        )


def _create(name: str, fields: dict[str, Any], using: str) -> None:
    fields = dict(fields)
    enabled = fields["settings_enabled"]
    schedule = Schedule(name=name, defined_in=DefinedIn.SETTINGS, enabled=enabled, **fields)
    schedule.save(using=using, force_insert=True)
    logger.info(
        "Schedule created from DBJOBS_SCHEDULES name=%s cron=%r",
        name,
        schedule.cron,
        extra=log_fields.for_schedule(name),
    )


def settings_changes(schedule: Schedule, fields: dict[str, Any]) -> list[str]:
    """What syncing a DBJOBS_SCHEDULES entry's `fields` would change of its row: field names."""
    changed = [field for field, value in fields.items() if getattr(schedule, field) != value]
    if schedule.defined_in != DefinedIn.SETTINGS or schedule.removed_at is not None:
        changed.append("defined_in")
    return changed


def _update(schedule: Schedule, fields: dict[str, Any], using: str) -> None:
    changed = settings_changes(schedule, fields)
    if not changed:
        return
    if schedule.defined_in != DefinedIn.SETTINGS:
        logger.warning(
            "Schedule taken over by DBJOBS_SCHEDULES name=%s",
            schedule.name,
            extra=log_fields.for_schedule(schedule.name),
        )
    if "settings_enabled" in changed:
        schedule.enabled = fields["settings_enabled"]  # the developer changed it: applies
    for field, value in fields.items():
        setattr(schedule, field, value)
    schedule.defined_in = DefinedIn.SETTINGS
    schedule.removed_at = None
    schedule.save(using=using)
    logger.info(
        "Schedule updated from DBJOBS_SCHEDULES name=%s changed=%s",
        schedule.name,
        ",".join(changed),
        extra=log_fields.for_schedule(schedule.name),
    )
