"""Checks of the DBJOBS_ settings' values: numbers, durations, switches and the context hooks."""

import datetime

from django.core import checks
from django.utils.module_loading import import_string

from ..conf import settings
from ..models.job import MAX_PRIORITY, MIN_PRIORITY
from ..operations import retention

# (setting, test, message, hint, id); ids are never reused.
NUMBER_RULES = [
    (
        "POLL_INTERVAL",
        lambda v: _number(v) and v > 0,
        "must be a number of seconds above 0",
        "For example: DBJOBS_POLL_INTERVAL = 1.0",
        "E003",
    ),
    (
        "SHUTDOWN_GRACE",
        lambda v: _number(v) and v >= 0,
        "must be a number of seconds, 0 or more",
        "Keep it below your platform's SIGKILL delay (often 30 s).",
        "E004",
    ),
    (
        "DEFAULT_MAX_ATTEMPTS",
        lambda v: _integer(v) and v >= 1,
        "must be a positive integer",
        "For example: DBJOBS_DEFAULT_MAX_ATTEMPTS = 3",
        "E005",
    ),
    (
        "DEFAULT_PRIORITY",
        lambda v: _integer(v) and MIN_PRIORITY <= v <= MAX_PRIORITY,
        f"must be an integer from {MIN_PRIORITY} to {MAX_PRIORITY}",
        "The default is 0.",
        "E006",
    ),
    (
        "RETRY_BACKOFF",
        lambda v: _number(v) and v >= 0,
        "must be a number of seconds, 0 or more",
        "For example: DBJOBS_RETRY_BACKOFF = 2.0",
        "E007",
    ),
    (
        "RETRY_BACKOFF_MAX",
        lambda v: _number(v) and v >= 0,
        "must be a number of seconds, 0 or more",
        "For example: DBJOBS_RETRY_BACKOFF_MAX = 3600",
        "E008",
    ),
    (
        "HEARTBEAT_INTERVAL",
        lambda v: _number(v) and v > 0,
        "must be a number of seconds above 0",
        "The default is 5.0.",
        "E012",
    ),
    (
        "HEARTBEAT_TIMEOUT",
        lambda v: _number(v) and v > 0,
        "must be a number of seconds above 0",
        "The default is 30.0.",
        "E013",
    ),
    (
        "SWEEP_INTERVAL",
        lambda v: _number(v) and v > 0,
        "must be a number of seconds above 0",
        "The default is 10.0.",
        "E014",
    ),
    (
        "UNKNOWN_JOB_GRACE",
        lambda v: _number(v) and v >= 0,
        "must be a number of seconds, 0 or more",
        "The default is 3600 (an hour): long enough for a rolling deploy.",
        "E016",
    ),
    (
        "SCHEDULE_CHECK_INTERVAL",
        lambda v: _number(v) and v > 0,
        "must be a number of seconds above 0",
        "The default is 10.0.",
        "E018",
    ),
    (
        "ADMIN_MASKED_ARGUMENTS",
        lambda v: _names(v),
        "must be a list of argument names (or parts of names)",
        "For example: ['password', 'token'].",
        "E019",
    ),
    (
        "ADMIN_MASKED_JOBS",
        lambda v: _names(v),
        "must be a list of job names",
        "For example: ['billing.jobs.charge_card'].",
        "E020",
    ),
    (
        "MAX_PAYLOAD_BYTES",
        lambda v: _integer(v) and v >= 1,
        "must be a positive integer (bytes)",
        "The default is 1048576 (1 MiB).",
        "E009",
    ),
    (
        "MAX_CHECKPOINT_BYTES",
        lambda v: _integer(v) and v >= 1,
        "must be a positive integer (bytes)",
        "The default is 65536 (64 KiB).",
        "E036",
    ),
]


def _names(value) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(item, str) and item for item in value)


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def number_errors() -> list[checks.Error]:
    """One error per NUMBER_RULES setting whose value breaks its rule."""
    errors = []
    for name, valid, message, hint, check_id in NUMBER_RULES:
        value = getattr(settings, name)
        if not valid(value):
            errors.append(
                checks.Error(f"DBJOBS_{name} {message}, not {value!r}.", hint=hint, id=f"dbjobs.{check_id}")
            )
    return errors


def hook_errors() -> list[checks.Error]:
    """DBJOBS_CONTEXT_CAPTURE and DBJOBS_CONTEXT_RESTORE must name importable functions."""
    errors = []
    for name in ("CONTEXT_CAPTURE", "CONTEXT_RESTORE"):
        path = getattr(settings, name)
        if path is None:
            continue
        problem = None
        if not isinstance(path, str):
            problem = f"must be a dotted path to a function, not {path!r}"
        else:
            try:
                hook = import_string(path)
            except ImportError as exc:
                problem = f"cannot be imported: {exc}"
            else:
                if not callable(hook):
                    problem = f"({path}) is not callable"
        if problem:
            errors.append(
                checks.Error(
                    f"DBJOBS_{name} {problem}.",
                    hint="For example: DBJOBS_CONTEXT_CAPTURE = 'myproject.jobs.job_context'. "
                    "See 'The enqueuer's context' in the docs.",
                    id="dbjobs.E021",
                )
            )
    return errors


def timeout_errors() -> list[checks.Error]:
    """DBJOBS_DEFAULT_TIMEOUT must be None or a number of seconds above 0."""
    default_timeout = settings.DEFAULT_TIMEOUT
    if default_timeout is None or (_number(default_timeout) and default_timeout > 0):
        return []
    return [
        checks.Error(
            f"DBJOBS_DEFAULT_TIMEOUT must be None or a number of seconds above 0, not {default_timeout!r}.",
            hint="For example: DBJOBS_DEFAULT_TIMEOUT = 600; @job(timeout=...) sets one job's.",
            id="dbjobs.E027",
        )
    ]


def switch_errors() -> list[checks.Error]:
    """The settings that are True or False."""
    errors = []
    for name, check_id, hint in (
        (
            "ASYNC_CLAIM_COMMIT",
            "dbjobs.E028",
            "False (the default) waits for every claim's commit to reach the disk.",
        ),
        (
            "PREPARED_STATEMENTS",
            "dbjobs.E029",
            "True (the default) prepares the worker's claim and enqueue()'s INSERT on PostgreSQL.",
        ),
        (
            "TRACING",
            "dbjobs.E034",
            "True (the default) traces jobs whenever an OpenTelemetry tracer provider is set.",
        ),
    ):
        value = getattr(settings, name)
        if not isinstance(value, bool):
            errors.append(
                checks.Error(f"DBJOBS_{name} must be True or False, not {value!r}.", hint=hint, id=check_id)
            )
    return errors


def keep_errors() -> list[checks.Error]:
    """DBJOBS_KEEP_SUCCEEDED and DBJOBS_KEEP_FAILED: None, or a duration retention can use."""
    errors = []
    for name in ("KEEP_SUCCEEDED", "KEEP_FAILED"):
        value = getattr(settings, name)
        seconds = value.total_seconds() if isinstance(value, datetime.timedelta) else value
        if seconds is not None and not (_number(seconds) and 0 <= seconds <= retention.MAX_KEEP):
            errors.append(
                checks.Error(
                    f"DBJOBS_{name} must be None, a number of seconds (0 to 100 years) or a timedelta, "
                    f"not {value!r}.",
                    hint="For example: DBJOBS_KEEP_SUCCEEDED = timedelta(days=7); None keeps jobs forever.",
                    id="dbjobs.E025",
                )
            )
    return errors


def heartbeat_warnings() -> list[checks.Warning]:
    """A heartbeat timeout under three intervals: a busy worker may be judged dead."""
    interval, timeout = settings.HEARTBEAT_INTERVAL, settings.HEARTBEAT_TIMEOUT
    if not (_number(interval) and _number(timeout) and 0 < interval and timeout < 3 * interval):
        return []
    return [
        checks.Warning(
            f"DBJOBS_HEARTBEAT_TIMEOUT ({timeout}) is less than three heartbeat intervals "
            f"({interval}); a live but busy worker may be judged dead and its jobs run twice.",
            hint="Keep DBJOBS_HEARTBEAT_TIMEOUT at least 3 x DBJOBS_HEARTBEAT_INTERVAL.",
            id="dbjobs.W002",
        )
    ]
