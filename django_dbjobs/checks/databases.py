"""Checks of the databases: SQLite's options and version, SKIP LOCKED, the migrations' history,
the LISTEN alias."""

from django.core import checks
from django.db import connections

from .. import db
from ..conf import settings
from ..db import migration_history, support


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


def database_errors(alias: str) -> list[checks.Error]:
    """What keeps database `alias` from running jobs: an old SQLite, no SKIP LOCKED, a partial history."""
    errors = []
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


def listen_database_errors() -> list[checks.Error]:
    """DBJOBS_LISTEN_DATABASE: None, the alias of a PostgreSQL database in DATABASES, or a dict
    {worker alias: such an alias}."""
    setting = settings.LISTEN_DATABASE
    if setting is None:
        return []
    pairs = setting.items() if isinstance(setting, dict) else [(None, setting)]
    problems = [problem for worker, alias in pairs for problem in _listen_alias_problems(worker, alias)]
    return [
        checks.Error(
            f"DBJOBS_LISTEN_DATABASE {problem}.",
            hint="Name a DATABASES alias that connects straight to the workers' PostgreSQL database "
            "(not through a transaction pooler), for example DBJOBS_LISTEN_DATABASE = 'direct', or one "
            "per worker alias: {'default': 'direct'}; None (the default) listens on the worker's own.",
            id="dbjobs.E035",
        )
        for problem in problems
    ]


def _listen_alias_problems(worker, alias) -> list[str]:
    """What is wrong with LISTEN alias `alias` named for workers of `worker` (None: all)."""
    where = "" if worker is None else f" for {worker!r}"
    if worker is not None and (not isinstance(worker, str) or worker not in connections.settings):
        return [f"has a key {worker!r}, which is not an alias in DATABASES"]
    if alias is None and worker is not None:  # that alias's workers LISTEN on their own
        return []
    if not isinstance(alias, str) or alias not in connections.settings:
        return [f"names {alias!r}{where}, which is not an alias in DATABASES"]
    if connections[alias].vendor != "postgresql":
        vendor = connections[alias].vendor  # not display_name: MySQL's asks the server
        return [f"names {alias!r}{where}, a {vendor} database; workers LISTEN on PostgreSQL only"]
    return []
