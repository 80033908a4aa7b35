"""Every management command on a database without the app's tables: exit 1 and one line, run migrate."""

import os
import subprocess
import sys
import uuid

import pytest
from django.db import connection

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.django_db(transaction=True)

COMMANDS = [
    ["run_jobs", "--burst"],
    ["run_jobs", "--burst", "--processes", "2"],
    ["dbjobs_status"],
    ["dbjobs_schedules"],
    ["dbjobs_schedules", "--run-now", "nightly"],
    ["prune_jobs", "--dry-run"],
    ["dbjobs_import_tasks_db"],
]


@pytest.fixture(scope="module")
def empty_database(django_db_setup, django_db_blocker, tmp_path_factory):
    """A database on the test server (or an SQLite file) with no table at all; dropped afterwards."""
    with django_db_blocker.unblock():
        if connection.vendor == "sqlite":
            yield str(tmp_path_factory.mktemp("empty") / "empty.sqlite3")
            return
        name = f"dbjobs_empty_{uuid.uuid4().hex[:8]}"
        quoted = connection.ops.quote_name(name)
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {quoted}")
        try:
            yield name
        finally:
            with connection.cursor() as cursor:
                cursor.execute(f"DROP DATABASE {quoted}")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_command_on_an_unmigrated_database_says_to_migrate_in_one_line(command, empty_database):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DBJOBS_TEST_DATABASE_NAME": empty_database,
        "PYTHONPATH": ROOT,
    }
    done = subprocess.run(
        [sys.executable, "-m", "django", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done
    assert done.stdout == "", done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "CommandError: The database 'default' lacks django_dbjobs migrations (django_dbjobs."
    )
    assert lines[0].endswith("Run `python manage.py migrate`."), lines[0]
