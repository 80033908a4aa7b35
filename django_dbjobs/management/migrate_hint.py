"""The one line a command prints when its database lacks the app's tables: run migrate."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.base import CommandError
from django.db import DatabaseError, InterfaceError

from .. import db
from ..exceptions import MissingMigrations


@contextmanager
def saying_to_migrate(using: str) -> Iterator[None]:
    """Turn a database error caused by missing migrations into a CommandError saying to migrate.

    Migrations are looked up only once a query has failed, so a command on a migrated
    database pays nothing for it; any other error goes on as it was.
    """
    try:
        yield
    except (DatabaseError, InterfaceError):
        try:
            db.require_migrated(using)
        except MissingMigrations as missing:
            raise CommandError(str(missing)) from None
        except (DatabaseError, InterfaceError):
            pass  # the migrations cannot be read either: the first error says more
        raise
