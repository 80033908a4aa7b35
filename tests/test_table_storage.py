"""Migration 0005: the job table's autovacuum settings on PostgreSQL, set and reset; nothing elsewhere."""

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from django_dbjobs.db.table_storage import SetAutovacuum

MIGRATION = ("django_dbjobs", "0005_job_table_autovacuum")


def reloptions() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'django_dbjobs_job'")
        (options,) = cursor.fetchone()
    return sorted(options or [])


def operation() -> SetAutovacuum:
    (only,) = MigrationLoader(None).get_migration(*MIGRATION).operations
    return only


@pytest.mark.django_db(transaction=True)
def test_the_job_table_is_vacuumed_after_one_percent_of_it_changed_and_unapplying_resets_it():
    loader = MigrationLoader(connection)
    state = loader.project_state(MIGRATION)
    op = operation()
    if connection.vendor != "postgresql":
        with connection.schema_editor() as editor:  # a no-op, both ways
            op.database_backwards("django_dbjobs", editor, state, state)
            op.database_forwards("django_dbjobs", editor, state, state)
        return
    assert reloptions() == [
        "autovacuum_analyze_scale_factor=0.02",
        "autovacuum_vacuum_cost_limit=2000",
        "autovacuum_vacuum_insert_scale_factor=0.01",
        "autovacuum_vacuum_scale_factor=0.01",
    ]
    try:
        with connection.schema_editor() as editor:
            op.database_backwards("django_dbjobs", editor, state, state)
        assert reloptions() == []
    finally:
        with connection.schema_editor() as editor:
            op.database_forwards("django_dbjobs", editor, state, state)
    assert len(reloptions()) == 4


def test_the_operation_describes_and_deconstructs_itself():
    op = operation()
    name, args, kwargs = op.deconstruct()
    assert (name, args) == ("SetAutovacuum", [])
    assert SetAutovacuum(**kwargs).parameters == op.parameters
    assert "autovacuum" in op.describe()
