"""Index changes made while jobs go on (db/online_index.py): built and dropped without blocking
writes, and a re-run after a failure works.

Tried on migrations 0007 and 0009 of the development releases, which made them (the
fixture tests/old_migrations): the test database has their schema, made by the initial
migration that replaces them, and records them as applied.
"""

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

from django_dbjobs import db
from django_dbjobs.db.online_index import _index_state, is_index_only
from django_dbjobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)

MIGRATION = ("django_dbjobs", "0007_admin_indexes")
TABLE = Job._meta.db_table


@pytest.fixture
def old_migrations(settings):
    settings.MIGRATION_MODULES = {"django_dbjobs": "tests.old_migrations"}


def states():
    loader = MigrationExecutor(connection).loader
    return loader.project_state(("django_dbjobs", "0006_queues_dead_letters")), loader.project_state(
        MIGRATION
    )


def operations():
    loader = MigrationExecutor(connection).loader
    return loader.get_migration(*MIGRATION).operations


@pytest.mark.usefixtures("old_migrations")
def test_a_worker_starts_before_an_index_only_migration_is_applied_but_not_before_others():
    loader = MigrationExecutor(connection).loader
    assert is_index_only(loader.get_migration("django_dbjobs", "0009_leaner_job_indexes"))
    assert not is_index_only(loader.get_migration("django_dbjobs", "0008_enqueuer_context"))
    assert not is_index_only(loader.get_migration("django_dbjobs", "0001_initial"))
    recorder = MigrationRecorder(connection)
    assert db.pending_migrations() == []
    recorder.record_unapplied("django_dbjobs", "0009_leaner_job_indexes")
    try:
        assert db.pending_migrations() == [], "an index-only migration does not hold workers back"
        recorder.record_unapplied("django_dbjobs", "0008_enqueuer_context")
        assert db.pending_migrations() == ["django_dbjobs.0008_enqueuer_context"]
    finally:
        recorder.record_applied("django_dbjobs", "0008_enqueuer_context")
        recorder.record_applied("django_dbjobs", "0009_leaner_job_indexes")


@pytest.mark.usefixtures("old_migrations")
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
@pytest.mark.usefixtures("old_migrations")
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


LEAN = ("django_dbjobs", "0009_leaner_job_indexes")


def job_indexes() -> dict:
    with connection.cursor() as cursor:
        return connection.introspection.get_constraints(cursor, TABLE)


def id_pattern_indexes() -> list[str]:
    """PostgreSQL: the job table's varchar_pattern_ops indexes (Django's LIKE index on the id)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            [TABLE, "%varchar_pattern_ops%"],
        )
        return [row[0] for row in cursor.fetchall()]


def assert_lean_indexes():
    indexes = job_indexes()
    assert "dbjobs_job_worker_idx" not in indexes
    running = indexes["dbjobs_job_running_idx"]["columns"]
    assert running == (["worker"] if connection.features.supports_partial_indexes else ["status", "worker"])
    if connection.vendor == "postgresql":
        assert id_pattern_indexes() == []


def test_the_job_table_has_the_running_jobs_index_and_no_like_index():
    assert_lean_indexes()


@pytest.mark.usefixtures("old_migrations")
def test_0009_goes_back_to_the_old_indexes_and_forward_again_twice():
    executor = MigrationExecutor(connection)
    try:
        executor.migrate([("django_dbjobs", "0008_enqueuer_context")])
        indexes = job_indexes()
        assert "dbjobs_job_running_idx" not in indexes
        assert indexes["dbjobs_job_worker_idx"]["columns"] == ["status", "worker"]
        if connection.vendor == "postgresql":
            assert len(id_pattern_indexes()) == 1
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate([LEAN])
    assert_lean_indexes()
    # Applied again over what it made (a migration interrupted after its work): no error.
    loader = MigrationExecutor(connection).loader
    before = loader.project_state(("django_dbjobs", "0008_enqueuer_context"))
    after = loader.project_state(LEAN)
    with connection.schema_editor(atomic=False) as editor:
        state = before
        for operation in loader.get_migration(*LEAN).operations:
            following = state.clone()
            operation.state_forwards("django_dbjobs", following)
            operation.database_forwards("django_dbjobs", editor, state, following)
            state = following
    job = ("django_dbjobs", "job")
    assert state.models[job].options["indexes"] == after.models[job].options["indexes"]
    assert_lean_indexes()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="CONCURRENTLY is PostgreSQL's")
@pytest.mark.usefixtures("old_migrations")
def test_postgresql_changes_the_indexes_of_0009_concurrently():
    out = io.StringIO()
    call_command("sqlmigrate", *LEAN, stdout=out)
    sql = out.getvalue()
    assert sql.count("CREATE INDEX CONCURRENTLY") == 1
    assert sql.count("DROP INDEX CONCURRENTLY IF EXISTS") == 2
    assert '"django_dbjobs_job_id_' in sql and '_like"' in sql


@pytest.mark.skipif(connection.vendor != "postgresql", reason="only PostgreSQL adds a LIKE index")
def test_postgresql_the_initial_migration_never_builds_the_like_index_of_the_id():
    out = io.StringIO()
    call_command("sqlmigrate", "django_dbjobs", "0001_initial", stdout=out)
    sql = out.getvalue()
    assert '"django_dbjobs_job_id_' not in sql
    assert '"django_dbjobs_schedule_name_' in sql and "varchar_pattern_ops" in sql  # others kept, as before


def test_a_workers_running_jobs_are_found_on_the_running_index():
    vendor = connection.vendor
    sql, params = Job.objects.owned_by("w1").values_list("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute(("EXPLAIN QUERY PLAN " if vendor == "sqlite" else "EXPLAIN ") + sql, params)
            plan = str(cursor.fetchall())
        finally:
            if vendor == "postgresql":
                cursor.execute("RESET enable_seqscan")
    assert "dbjobs_job_running_idx" in plan
