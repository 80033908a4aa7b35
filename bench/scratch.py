"""The benchmark scripts' Django setup: bench.settings on a database URL, and a scratch database."""

from __future__ import annotations

import contextlib
import os


def setup(database_url: str, settings: str = "bench.settings") -> None:
    """Configure Django with bench/settings.py (or the `settings` module) pointed at `database_url`."""
    os.environ["BENCH_DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    import django

    django.setup()


@contextlib.contextmanager
def scratch_database():
    """A migrated scratch database (``test_<name>``, or ``<file>-scratch.sqlite3``) on the
    configured server for the block, dropped after it: the named database is never touched."""
    from django.db import connection

    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield connection
    finally:
        connection.creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)
