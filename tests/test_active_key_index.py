"""Migration 0009: one active job per key, enforced by an index over the rows with a key only."""

import io

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from django_dbjobs import enqueue, prepare
from django_dbjobs.db.online_index import _index_state
from django_dbjobs.models import Job, JobStatus
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("django_dbjobs", "0008_enqueuer_context")
AFTER = ("django_dbjobs", "0009_active_key_partial")
TABLE = Job._meta.db_table
NAME = "dbjobs_job_active_key_uniq"


def index_sql() -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [NAME])
        elif connection.vendor == "sqlite":
            cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [NAME])
        else:
            cursor.execute(f"SHOW CREATE TABLE {TABLE}")
            return cursor.fetchone()[1]
        return cursor.fetchone()[0]


def test_the_index_leaves_out_rows_without_an_active_key_where_it_can():
    sql = index_sql()
    if connection.features.supports_partial_indexes:
        assert "UNIQUE" in sql.upper() and "active_key" in sql and "WHERE" in sql.upper()
        assert "NOT NULL" in sql.upper()
    else:
        assert f"UNIQUE KEY `{NAME}` (`name`,`active_key`)" in sql
    with connection.cursor() as cursor:
        names = connection.introspection.get_constraints(cursor, TABLE)
    assert "dbjobs_job_one_active_per_key" not in names


def test_one_active_job_per_key_holds_in_the_database_itself():
    enqueue(jobs.add, 1, 2, unique_key="k")
    twin = prepare(jobs.add, 1, 2, unique_key="k")
    with pytest.raises(IntegrityError), transaction.atomic():
        twin.save(force_insert=True)  # past enqueue()'s ON CONFLICT: the index refuses it
    Job.objects.filter(unique_key="k").update(status=JobStatus.SUCCESSFUL, active_key=None)
    twin.save(force_insert=True)  # the key is free once its holder finished
    enqueue(jobs.add, 1, 2)
    enqueue(jobs.add, 1, 2)  # no key: any number
    assert Job.objects.count() == 4


def test_migrating_back_and_forth_keeps_the_rule():
    enqueue(jobs.add, 1, 2, unique_key="k")
    executor = MigrationExecutor(connection)
    try:
        executor.migrate([BEFORE])
        with connection.cursor() as cursor:
            names = connection.introspection.get_constraints(cursor, TABLE)
        assert "dbjobs_job_one_active_per_key" in names and NAME not in names
        executor.loader.build_graph()
        executor.migrate([AFTER])
        # An interrupted run (the new index built, the old constraint still there) runs again.
        executor.loader.build_graph()
        executor.migrate([BEFORE])
        before = executor.loader.project_state(BEFORE)
        after = executor.loader.project_state(AFTER)
        add = executor.loader.get_migration(*AFTER).operations[0]
        with connection.schema_editor(atomic=False) as editor:
            add.database_forwards("django_dbjobs", editor, before, after)
        executor.loader.build_graph()
        executor.migrate([AFTER])
    finally:
        executor.loader.build_graph()
        executor.migrate([AFTER])
    assert _index_state(connection, TABLE, NAME) == "valid"
    twin = prepare(jobs.add, 1, 2, unique_key="k")
    with pytest.raises(IntegrityError), transaction.atomic():
        twin.save(force_insert=True)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="CREATE INDEX CONCURRENTLY is PostgreSQL's")
def test_postgresql_builds_it_concurrently_and_replaces_an_interrupted_build():
    out = io.StringIO()
    call_command("sqlmigrate", *AFTER, stdout=out)
    assert "CREATE UNIQUE INDEX CONCURRENTLY" in out.getvalue()
    executor = MigrationExecutor(connection)
    before, after = executor.loader.project_state(BEFORE), executor.loader.project_state(AFTER)
    add = executor.loader.get_migration(*AFTER).operations[0]
    with connection.cursor() as cursor:  # what a cancelled CONCURRENTLY build leaves behind
        cursor.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", [NAME])
    assert _index_state(connection, TABLE, NAME) == "invalid"
    with connection.schema_editor(atomic=False) as editor:
        add.database_forwards("django_dbjobs", editor, before, after)
    assert _index_state(connection, TABLE, NAME) == "valid"
