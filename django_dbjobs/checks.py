"""System checks for the DBJOBS_ settings and the databases (ids dbjobs.E0xx / W0xx)."""

import datetime
import difflib

from django.conf import settings as django_settings
from django.core import checks
from django.db import connections
from django.utils.module_loading import import_string

from . import db
from .conf import DEFAULTS, settings
from .db import migration_history, support
from .enqueuing import validation
from .flow import rates
from .models.job import MAX_PRIORITY, MIN_PRIORITY
from .operations import retention

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
]


def _names(value) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(item, str) and item for item in value)


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@checks.register()
def check_settings(app_configs=None, **kwargs):
    errors = []
    queues = settings.QUEUES
    if queues is not None and (
        not isinstance(queues, list | tuple)
        or not all(isinstance(q, str) and validation.QUEUE_NAME.match(q) for q in queues)
    ):
        errors.append(
            checks.Error(
                "DBJOBS_QUEUES must be None or a list of queue names.",
                hint="For example: DBJOBS_QUEUES = ['default', 'emails'].",
                id="dbjobs.E001",
            )
        )
    default_queue = settings.DEFAULT_QUEUE
    if (
        not isinstance(default_queue, str)
        or not validation.QUEUE_NAME.match(default_queue)
        or (isinstance(queues, list | tuple) and default_queue not in queues)
    ):
        errors.append(
            checks.Error(
                "DBJOBS_DEFAULT_QUEUE must be a queue name (and in DBJOBS_QUEUES when that is set).",
                hint="Queue names use letters, digits, '_', '.', ':' and '-'; the default is 'default'.",
                id="dbjobs.E002",
            )
        )
    for name, valid, message, hint, check_id in NUMBER_RULES:
        value = getattr(settings, name)
        if not valid(value):
            errors.append(
                checks.Error(f"DBJOBS_{name} {message}, not {value!r}.", hint=hint, id=f"dbjobs.{check_id}")
            )
    modules = settings.JOB_MODULES
    if not isinstance(modules, list | tuple) or not all(isinstance(m, str) for m in modules):
        errors.append(
            checks.Error(
                "DBJOBS_JOB_MODULES must be a list of module paths.",
                hint="For example: DBJOBS_JOB_MODULES = ['shop.billing'].",
                id="dbjobs.E010",
            )
        )
    errors.extend(schedule_errors())
    errors.extend(hook_errors())
    default_timeout = settings.DEFAULT_TIMEOUT
    if default_timeout is not None and not (_number(default_timeout) and default_timeout > 0):
        errors.append(
            checks.Error(
                "DBJOBS_DEFAULT_TIMEOUT must be None or a number of seconds above 0, "
                f"not {default_timeout!r}.",
                hint="For example: DBJOBS_DEFAULT_TIMEOUT = 600; @job(timeout=...) sets one job's.",
                id="dbjobs.E027",
            )
        )
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
    ):
        value = getattr(settings, name)
        if not isinstance(value, bool):
            errors.append(
                checks.Error(f"DBJOBS_{name} must be True or False, not {value!r}.", hint=hint, id=check_id)
            )
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
    interval, timeout = settings.HEARTBEAT_INTERVAL, settings.HEARTBEAT_TIMEOUT
    if _number(interval) and _number(timeout) and 0 < interval and timeout < 3 * interval:
        errors.append(
            checks.Warning(
                f"DBJOBS_HEARTBEAT_TIMEOUT ({timeout}) is less than three heartbeat intervals "
                f"({interval}); a live but busy worker may be judged dead and its jobs run twice.",
                hint="Keep DBJOBS_HEARTBEAT_TIMEOUT at least 3 x DBJOBS_HEARTBEAT_INTERVAL.",
                id="dbjobs.W002",
            )
        )
    errors.extend(
        checks.Error(problem, hint="For example: {'emails': {'rate': '100/m'}}.", id="dbjobs.E031")
        for problem in rates.setting_problems(settings.QUEUE_LIMITS)
    )
    errors.extend(unused_limit_warnings())
    errors.extend(unknown_setting_warnings())
    errors.extend(sqlite_warnings(connections.settings))
    return errors


@checks.register(checks.Tags.urls)  # it imports the URLconf: not in run_jobs (worker_checks.py)
def check_jobs(app_configs=None, **kwargs):
    return unimported_job_warnings()


def unimported_job_warnings() -> list[checks.Warning]:
    """A registered job whose module workers do not import: they would hand its jobs back as unknown.

    Looks at the jobs registered in this process once its URLconf, and so its views, are
    imported, so a ``@job`` in a helper module a view imports is found before its first
    enqueue.
    """
    from django.urls import get_resolver

    from . import registry
    from .registry import discovery

    try:
        get_resolver().url_patterns  # noqa: B018 - imports the URLconf, as check_url_config does
    except Exception:  # noqa: BLE001 - a broken URLconf is Django's own check's to report
        pass

    return [
        checks.Warning(
            f"Job {registered.name} is defined in {registered.func.__module__}, which workers do not import.",
            hint=discovery.unimported_message(registered),
            obj=registered.name,
            id="dbjobs.W004",
        )
        for registered in sorted(registry.registered().values(), key=lambda r: r.name)
        if not discovery.imported_by_workers(registered)
    ]


def unused_limit_warnings() -> list[checks.Warning]:
    """A DBJOBS_QUEUE_LIMITS queue that no job, schedule or setting names: a typo limits nothing."""
    from . import registry
    from .operations import known_queues

    limits = settings.QUEUE_LIMITS
    if not isinstance(limits, dict) or rates.setting_problems(limits):
        return []  # dbjobs.E031 says what is wrong
    if not set(limits) <= known_queues.declared():
        registry.discovered_with_errors()  # the job modules' @job(queue=...) count too
    declared = sorted(known_queues.declared())
    warnings = []
    for queue in sorted(set(limits) - set(declared)):
        close = difflib.get_close_matches(queue, declared, n=1, cutoff=0.6)
        warnings.append(
            checks.Warning(
                f"DBJOBS_QUEUE_LIMITS limits queue {queue!r}, which no registered job, schedule or "
                "setting names (nor DBJOBS_QUEUES): the limit may apply to nothing.",
                hint=(f"Did you mean {close[0]!r}? " if close else "")
                + "A queue named only in enqueue(queue=...) is not seen here: list it in DBJOBS_QUEUES "
                "or silence dbjobs.W005.",
                obj=queue,
                id="dbjobs.W005",
            )
        )
    return warnings


#: Settings that were renamed before a release: the name to use now.
RENAMED = {"DBJOBS_PREPARED_CLAIMS": "DBJOBS_PREPARED_STATEMENTS"}


def unknown_setting_warnings() -> list[checks.Warning]:
    """A ``DBJOBS_`` setting django-dbjobs does not read: a typo or an old name, silently ignored."""
    known = {f"DBJOBS_{name}" for name in DEFAULTS}
    warnings = []
    for name in sorted(dir(django_settings)):
        if not name.startswith("DBJOBS_") or name in known:
            continue
        close = RENAMED.get(name)
        if close is None:  # the part after the prefix, which every name shares
            matches = difflib.get_close_matches(name[len("DBJOBS_") :], sorted(DEFAULTS), n=1, cutoff=0.75)
            close = f"DBJOBS_{matches[0]}" if matches else None
        warnings.append(
            checks.Warning(
                f"{name} is not a django-dbjobs setting; it has no effect.",
                hint=f"Did you mean {close}?"
                if close
                else "The settings are listed in the settings reference.",
                id="dbjobs.W003",
            )
        )
    return warnings


def schedule_errors() -> list[checks.Error]:
    """One error per problem of DBJOBS_SCHEDULES, naming the schedule."""
    from .schedules.definitions import settings_problems

    # Checking a schedule's job imports the job modules: one that raises is named here,
    # instead of its traceback stopping check, migrate and runserver.
    broken = job_module_errors() if settings.SCHEDULES else []
    return broken + [
        checks.Error(
            problem,
            hint="See 'Periodic jobs' in the docs: {'job': 'app.jobs.report', 'cron': '30 2 * * *', "
            "'timezone': 'Europe/Paris'}.",
            id="dbjobs.E017",
        )
        for problem in settings_problems()
    ]


def job_module_errors() -> list[checks.Error]:
    """One error per job module that fails to import; its traceback is logged once."""
    from . import registry

    return [
        checks.Error(
            f"Job module {module} failed to import: {error}.",
            hint="Its traceback is in the log (logger django_dbjobs). Workers refuse to start "
            "until it imports, and schedules of its jobs cannot be checked.",
            obj=module,
            id="dbjobs.E032",
        )
        for module, error in registry.discovered_with_errors()[1].items()
    ]


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


def sqlite_warnings(databases: dict[str, dict]) -> list[checks.Warning]:
    """Warn about SQLite databases that would fail under a worker with 'database is locked'."""
    warnings = []
    for alias, settings_dict in databases.items():
        if not settings_dict["ENGINE"].endswith("sqlite3"):
            continue
        missing = support.sqlite_settings_problems(settings_dict)
        if missing:
            warnings.append(
                checks.Warning(
                    f"SQLite database {alias!r} is missing {' and '.join(missing)} in OPTIONS; "
                    "enqueues and claims may fail with 'database is locked'.",
                    hint=f'Add to DATABASES[{alias!r}]: "OPTIONS": {support.SQLITE_RECOMMENDED_OPTIONS!r}',
                    id="dbjobs.W001",
                )
            )
    return warnings


@checks.register(checks.Tags.database)
def check_databases(app_configs=None, databases=None, **kwargs):
    errors = []
    for alias in databases or []:
        connection = connections[alias]
        version = support.sqlite_version()
        if connection.vendor == "sqlite" and version < support.MIN_SQLITE_VERSION:
            errors.append(
                checks.Error(
                    f"Database {alias!r} uses SQLite {'.'.join(map(str, version))}, which has "
                    "no UPDATE ... RETURNING; the worker's claim needs it.",
                    hint="Use SQLite 3.35 or newer (Python's sqlite3 module is linked against it).",
                    id="dbjobs.E015",
                )
            )
        if connection.features.has_select_for_update and not db.can_skip_locked(alias):
            errors.append(
                checks.Error(
                    f"Database {alias!r} ({connection.display_name}) has no SELECT ... FOR UPDATE "
                    "SKIP LOCKED, so workers would block each other.",
                    hint="Use PostgreSQL, MySQL 8.0.1+ or MariaDB 10.6+.",
                    id="dbjobs.E011",
                )
            )
        errors.extend(migration_history_errors(alias))
    return errors


def migration_history_errors(alias: str) -> list[checks.Error]:
    """A database that applied only some of the development versions' migrations."""
    missing = migration_history.missing_replaced_migrations(alias)
    if not missing:
        return []
    return [
        checks.Error(
            f"Database {alias!r} lacks django_dbjobs migrations {', '.join(missing)} of a development "
            "version, which this version cannot apply: one initial migration replaces them all.",
            hint="Install the django-dbjobs version you upgraded from (or, if it lacks them too, a later "
            "development version that has them), run `python manage.py migrate django_dbjobs`, then "
            "upgrade again (docs: Installation, 'Upgrading from a development release').",
            id="dbjobs.E030",
        )
    ]
