"""Which migrations a database still needs: pending ones, and the rest of a partly applied old chain.

Only this app's migrations are read, never the project's: Django's MigrationLoader imports
every app's migration modules, and a worker, which checks at its start, would keep them
all in memory for its life (a megabyte or more in a real project). This app's migrations
depend on nothing but each other, in the order of their names.
"""

from __future__ import annotations

import contextlib
import pkgutil
import sys
from importlib import import_module

from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.migration import Migration
from django.db.migrations.recorder import MigrationRecorder

from ..exceptions import MissingMigrations
from .online_index import is_index_only

APP_LABEL = "django_dbjobs"


def disk_migrations() -> dict[str, Migration]:
    """This app's migrations on disk by name, in order (``MIGRATION_MODULES`` honoured)."""
    module_name, _explicit = MigrationLoader.migrations_module(APP_LABEL)
    if module_name is None:
        return {}
    module = import_module(module_name)
    names = sorted(
        name for _finder, name, is_package in pkgutil.iter_modules(module.__path__) if not is_package
    )
    return {
        name: import_module(f"{module_name}.{name}").Migration(name, APP_LABEL)
        for name in names
        if name[0] not in "_~"
    }


def _applied(using: str) -> set[str] | None:
    """This app's migrations recorded as applied; None when there is no record table."""
    recorder = MigrationRecorder(connections[using])
    if not recorder.has_table():
        return None
    return {name for app, name in recorder.applied_migrations() if app == APP_LABEL}


def missing_replaced_migrations(using: str = "default") -> list[str]:
    """The replaced migrations this database lacks, if it applied some of them; else [].

    A database that applied every migration a squashed one replaces has the squashed one
    applied; a database that applied none runs it. One that applied only some can do
    neither: Django then drops our app from the plan, or runs the squashed migration
    over tables that exist, and only the release that shipped the missing migrations
    can apply them. The squashed migration counts as one of them when it has the name
    of the first (0001_initial). They come in the order it lists them: the order they ran.
    """
    applied = _applied(using)
    return [] if applied is None else _missing_replaced(applied, disk_migrations())


def _missing_replaced(applied: set[str], disk: dict[str, Migration]) -> list[str]:
    missing = []
    for name, migration in disk.items():
        replaced = [replaced_name for _app, replaced_name in migration.replaces]
        if not replaced:
            continue
        if name in applied or applied.intersection(replaced):
            missing += [replaced_name for replaced_name in replaced if replaced_name not in applied]
    return missing


def pending_migrations(using: str = "default") -> list[str]:
    """The django_dbjobs migrations a worker needs that are not yet applied to this database.

    Index-only migrations are left out (see online_index.py), and those that say workers
    do not need them (workers_may_start_without()): a worker runs without them.
    A database that applied only some of the migrations the initial one replaces lacks
    the rest (missing_replaced_migrations()), which Django's plan does not show.
    """
    disk = disk_migrations()
    applied = _applied(using) or set()
    missing = _missing_replaced(applied, disk)
    if missing:
        return [f"{APP_LABEL}.{name}" for name in missing]
    pending = []
    for name, migration in disk.items():
        replaced = [replaced_name for _app, replaced_name in migration.replaces]
        if name in applied or (replaced and applied.issuperset(replaced)):
            continue  # a squashed migration counts as applied when all it replaces is
        if not workers_may_start_without(migration):
            pending.append(f"{APP_LABEL}.{name}")
    return pending


def workers_may_start_without(migration: Migration) -> bool:
    """An index-only migration (online_index.is_index_only()), unless it says workers need
    it, or one that says they do not (``workers_need_it = False``: what it makes, workers
    look for, as they did the queue trigger that 0006 of the development versions made)."""
    if getattr(migration, "workers_need_it", None) is False:
        return True
    return is_index_only(migration)


def require_migrated(using: str = "default") -> None:
    """Raise MissingMigrations, saying to run migrate, if this database lacks migrations a worker needs.

    The migration modules it imports are forgotten after (read_once()): a worker reads them
    once, at its start.
    """
    with read_once():
        pending = pending_migrations(using)
    if pending:
        raise MissingMigrations(
            f"The database {using!r} lacks django_dbjobs migrations ({', '.join(pending)}). "
            "Run `python manage.py migrate`."
        )


#: Migration modules read ahead (read_migrations_ahead()), forgotten by the next read_once().
_read_ahead: set[str] = set()


def read_migrations_ahead() -> None:
    """Import this app's migrations now, for the worker's check (require_migrated()) to use and
    then forget: run_jobs reads them before it imports the worker's code, whose memory then
    reuses what compiling them took."""
    before = set(sys.modules)
    disk_migrations()
    _read_ahead.update(set(sys.modules) - before)


@contextlib.contextmanager
def read_once():
    """Forget the migration modules of this app the block imported, or read ahead for it (those
    imported otherwise stay).

    A worker reads its migrations once, at its start, and would keep them in memory for its
    life: their operations, fields and code, about 0.2 MiB (0001_initial lists the whole
    schema). Forgotten, they are freed, and imported again by whatever asks for them later
    (``migrate``, Django's MigrationLoader).
    """
    module_name, _explicit = MigrationLoader.migrations_module(APP_LABEL)
    before = set(sys.modules) - _read_ahead
    try:
        yield
    finally:
        _read_ahead.clear()
        if module_name is not None:
            prefix = f"{module_name}."
            for name in set(sys.modules) - before:
                if name.startswith(prefix):
                    del sys.modules[name]
                    package = sys.modules.get(module_name)
                    with contextlib.suppress(AttributeError):  # import_module() set it on the package
                        delattr(package, name[len(prefix) :])
