"""Migration 0007's indexes: built without blocking writes, and a re-run after a failure works."""

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from django_dbjobs import db
from django_dbjobs.db.online_index import INDEX_ONLY_MIGRATIONS, AddIndexOnline, _index_state
from django_dbjobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)

MIGRATION = ("django_dbjobs", "0007_admin_indexes")
TABLE = Job._meta.db_table


def states():
    loader = MigrationExecutor(connection).loader
    return loader.project_state(("django_dbjobs", "0006_queues_dead_letters")), loader.project_state(
        MIGRATION
    )


def operations():
    loader = MigrationExecutor(connection).loader
    return loader.get_migration(*MIGRATION).operations


def test_index_only_migrations_hold_nothing_but_online_indexes():
    loader = MigrationExecutor(connection).loader
    for name in INDEX_ONLY_MIGRATIONS:
        migration = loader.get_migration("django_dbjobs", name)
        assert migration.atomic is False
        assert migration.operations and all(isinstance(op, AddIndexOnline) for op in migration.operations)
    assert "django_dbjobs.0007_admin_indexes" not in db.pending_migrations()


def test_a_rerun_keeps_existing_indexes_and_builds_missing_ones():
    before, after = states()
    first = operations()[0]
    with connection.schema_editor(atomic=False) as editor:
        editor.remove_index(Job, first.index)
    assert _index_state(connection, TABLE, first.index.name) is None
    with connection.schema_editor(atomic=False) as editor:
        for operation in operations():  # one is missing, the others exist: no error
            operation.database_forwards("django_dbjobs", editor, before, after)
    assert all(_index_state(connection, TABLE, op.index.name) == "valid" for op in operations())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="CREATE INDEX CONCURRENTLY is PostgreSQL's")
def test_postgresql_builds_concurrently_and_replaces_an_interrupted_build():
    out = io.StringIO()
    call_command("sqlmigrate", *MIGRATION, stdout=out)
    assert out.getvalue().count("CREATE INDEX CONCURRENTLY") == 3
    before, after = states()
    first = operations()[0]
    with connection.cursor() as cursor:  # what a cancelled CONCURRENTLY build leaves behind
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", [first.index.name]
        )
    assert _index_state(connection, TABLE, first.index.name) == "invalid"
    with connection.schema_editor(atomic=False) as editor:
        first.database_forwards("django_dbjobs", editor, before, after)
    assert _index_state(connection, TABLE, first.index.name) == "valid"
