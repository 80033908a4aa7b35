"""Which migrations a database still needs: pending ones, and the rest of a partly applied old chain."""

from __future__ import annotations

from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from ..exceptions import MissingMigrations
from .online_index import is_index_only

APP_LABEL = "django_dbjobs"


def missing_replaced_migrations(using: str = "default", loader: MigrationLoader | None = None) -> list[str]:
    """The replaced migrations this database lacks, if it applied some of them; else [].

    A database that applied every migration a squashed one replaces has the squashed one
    applied; a database that applied none runs it. One that applied only some can do
    neither: Django then drops our app from the plan, or runs the squashed migration
    over tables that exist, and only the release that shipped the missing migrations
    can apply them. The squashed migration counts as one of them when it has the name
    of the first (0001_initial). `loader`: one already made for this database.
    """
    recorder = MigrationRecorder(connections[using])
    if not recorder.has_table():
        return []
    applied = {name for app, name in recorder.applied_migrations() if app == APP_LABEL}
    missing = []
    loader = loader or MigrationLoader(None, ignore_no_migrations=True)
    for (app, name), migration in loader.disk_migrations.items():
        replaced = [replaced_name for _app, replaced_name in migration.replaces]
        if app != APP_LABEL or not replaced:
            continue
        if name in applied or applied.intersection(replaced):
            missing += [replaced_name for replaced_name in replaced if replaced_name not in applied]
    return sorted(missing)


def pending_migrations(using: str = "default") -> list[str]:
    """The django_dbjobs migrations a worker needs that are not yet applied to this database.

    Index-only migrations are left out (see online_index.py): a worker runs without them.
    A database that applied only some of the migrations the initial one replaces lacks
    the rest (missing_replaced_migrations()), which Django's plan does not show.
    """
    executor = MigrationExecutor(connections[using])
    missing = missing_replaced_migrations(using, executor.loader)
    if missing:
        return [f"{APP_LABEL}.{name}" for name in missing]
    targets = [key for key in executor.loader.graph.leaf_nodes() if key[0] == "django_dbjobs"]
    plan = executor.migration_plan(targets)
    return [
        f"{migration.app_label}.{migration.name}"
        for migration, backwards in plan
        if not backwards and not is_index_only(migration)
    ]


def require_migrated(using: str = "default") -> None:
    """Raise MissingMigrations, saying to run migrate, if this database lacks migrations a worker needs."""
    pending = pending_migrations(using)
    if pending:
        raise MissingMigrations(
            f"The database {using!r} lacks django_dbjobs migrations ({', '.join(pending)}). "
            "Run `python manage.py migrate`."
        )
