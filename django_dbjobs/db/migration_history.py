"""Which of the migrations an initial migration replaces a database has applied: all, none or some."""

from __future__ import annotations

from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

APP_LABEL = "django_dbjobs"


def missing_replaced_migrations(using: str = "default") -> list[str]:
    """The replaced migrations this database lacks, if it applied some of them; else [].

    A database that applied every migration a squashed one replaces has the squashed one
    applied; a database that applied none runs it. One that applied only some can do
    neither: Django then drops our app from the plan, or runs the squashed migration
    over tables that exist, and only the release that shipped the missing migrations
    can apply them. The squashed migration counts as one of them when it has the name
    of the first (0001_initial).
    """
    recorder = MigrationRecorder(connections[using])
    if not recorder.has_table():
        return []
    applied = {name for app, name in recorder.applied_migrations() if app == APP_LABEL}
    missing = []
    for (app, name), migration in MigrationLoader(None, ignore_no_migrations=True).disk_migrations.items():
        replaced = [replaced_name for _app, replaced_name in migration.replaces]
        if app != APP_LABEL or not replaced:
            continue
        if name in applied or applied.intersection(replaced):
            missing += [replaced_name for replaced_name in replaced if replaced_name not in applied]
    return sorted(missing)
