"""The initial migration: it agrees with the models, makes what the nine migrations of the
development releases made, and finds a database they made complete (or refuses one they
left half done).

The old migrations are a fixture (tests/old_migrations, through ``MIGRATION_MODULES``).
A test that uses them unapplies the initial migration from the test database, applies
the old ones, and leaves the tables made by the initial migration again after it.
"""

import re

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations import Migration
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.test.utils import override_settings

from django_dbjobs import db, enqueue
from django_dbjobs.db import migration_history
from django_dbjobs.models import Job, JobStatus
from tests import jobs

APP = "django_dbjobs"
OLD_MIGRATIONS = {APP: "tests.old_migrations"}


@pytest.mark.django_db
def test_models_and_migrations_agree():
    # Exits with status 1 (SystemExit) when a model change has no migration.
    call_command("makemigrations", "django_dbjobs", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
def test_claim_index_matches_the_claim_order():
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Job._meta.db_table)
    columns = constraints["dbjobs_job_claimable_idx"]["columns"]
    if connection.features.supports_partial_indexes:
        assert columns == ["priority", "run_at", "id"]  # partial: WHERE status = 'READY' AND blocked = ''
    else:
        assert columns == ["status", "blocked", "priority", "run_at", "id"]


def latest() -> str:
    """The app's last migration."""
    (leaf,) = [name for app, name in MigrationExecutor(connection).loader.graph.leaf_nodes() if app == APP]
    return leaf


def migrate_app(target: str | None, *, old: bool = False) -> None:
    """Migrate django_dbjobs to `target` (None: unapply it all), by the old migrations or the new."""
    with override_settings(MIGRATION_MODULES=OLD_MIGRATIONS if old else {}):
        MigrationExecutor(connection).migrate([(APP, target)])


@pytest.fixture
def old_migrations(transactional_db):
    """Call it to remake the app's tables with the old migrations, up to the one named."""
    connection.close()  # a fresh session: nothing prepared against the tables dropped here
    migrate_app(None)

    def make(upto: str = "0009_leaner_job_indexes") -> None:
        migrate_app(upto, old=True)

    try:
        yield make
    finally:
        if (APP, "0002_flow_control") in MigrationRecorder(connection).applied_migrations():
            migrate_app("0001_initial")  # undo the migrations after the squash that a test applied
        migrate_app(None, old=True)
        migrate_app(latest())
        connection.close()


def test_a_fresh_database_gets_the_schema_the_old_migrations_made(old_migrations):
    migrate_app("0001_initial")
    fresh = schema()
    migrate_app(None)
    old_migrations()
    made_by_old = schema()
    assert fresh.keys() == made_by_old.keys()
    for part in fresh:  # one part at a time, for a readable difference
        assert fresh[part] == made_by_old[part], part
    job_indexes = fresh["django_dbjobs_job"]["constraints"]
    assert {"dbjobs_job_claim_idx", "dbjobs_job_running_idx"} <= job_indexes.keys()
    assert "dbjobs_job_worker_idx" not in job_indexes  # dropped by 0009, never made now
    if connection.vendor == "postgresql":
        assert len(fresh["triggers"]) == 3 and not [name for name in job_indexes if name.endswith("_like")]


def test_a_database_the_old_migrations_made_needs_only_later_ones_and_runs_jobs(old_migrations, run_jobs):
    old_migrations()
    executor = MigrationExecutor(connection)
    assert executor.migration_plan([(APP, "0001_initial")]) == []
    # Only the migrations made after the squash are left: the old ones count as 0001.
    # 0005 builds an index workers do not need: they may start before it; 0006 makes a
    # trigger they look for.
    assert db.pending_migrations() == [
        f"{APP}.0002_flow_control",
        f"{APP}.0003_flow_control_indexes",
        f"{APP}.0004_workflows",
    ]
    call_command("migrate", APP, skip_checks=False, verbosity=0)  # its checks pass
    assert db.pending_migrations() == []
    job = enqueue(jobs.add, 2, 3)
    worker = run_jobs("--burst")
    assert worker.wait() == 0, worker.output()
    job.refresh_from_db()
    assert (job.status, job.return_value) == (JobStatus.SUCCESSFUL, 5)


@pytest.mark.parametrize("applied", ["0001_initial", "0006_queues_dead_letters"])
def test_a_database_with_only_some_old_migrations_is_refused_with_what_to_do(old_migrations, applied):
    old_migrations(applied)
    before = schema()
    missing = migration_history.missing_replaced_migrations()
    assert missing[0] == ("0002_unique_keys" if applied == "0001_initial" else "0007_admin_indexes")
    assert missing[-1] == "0009_leaner_job_indexes"
    with pytest.raises(SystemCheckError, match=r"dbjobs\.E030") as refused:
        call_command("migrate", APP, skip_checks=False, verbosity=0)
    assert "Install the django-dbjobs version you upgraded from" in str(refused.value)
    assert schema() == before
    # run_jobs stops with "Run `python manage.py migrate`", which then says the above.
    assert db.pending_migrations() == [f"{APP}.{name}" for name in missing]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="NOTIFY triggers exist on PostgreSQL only")
@pytest.mark.django_db(transaction=True)
def test_a_queue_paused_or_resumed_notifies_workers_and_the_trigger_goes_with_its_migration():
    """0006: a statement that may change which queues are paused NOTIFYs 'queues'
    (worker/claiming/paused_queues.py); a worker's LISTEN connection trusts what it hears only where
    the trigger is, and may start without it."""
    from django_dbjobs.db.listen import Listen
    from django_dbjobs.models import Queue
    from tests.test_wakeup import Listening

    def hears_queues() -> bool:
        listen = Listen("default")
        assert listen.connect()
        try:
            return listen.queue_session is not None
        finally:
            listen.close()

    listener = Listening()
    try:
        Queue.objects.pause(["emails"])
        Queue.objects.resume(["emails"])
        Queue.objects.all().delete()
        heard = listener.payloads(1.0)
    finally:
        listener.close()
    assert heard == ["queues"] * 4, "the insert and update of pause(), resume(), delete()"
    trigger = "dbjobs_queue_changed"
    assert trigger in dict(schema()["triggers"]) and hears_queues()
    try:
        migrate_app("0005_workflows_index")
        assert trigger not in dict(schema()["triggers"])
        assert "dbjobs_notify_payload" not in dict(schema()["functions"])
        assert not hears_queues()
        assert db.pending_migrations() == [], "workers may start before it"
    finally:
        migrate_app(latest())
    assert trigger in dict(schema()["triggers"]) and hears_queues()
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE django_dbjobs_queue DISABLE TRIGGER {trigger}")
    try:
        assert not hears_queues(), "disabled: a pause would go unheard"
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE django_dbjobs_queue ENABLE TRIGGER {trigger}")


def test_a_project_migration_that_depends_on_an_old_migration_follows_the_initial_one():
    """Such as one adding a foreign key to Schedule, made against 0005_schedules."""

    class WithProjectMigration(MigrationLoader):
        def load_disk(self):
            super().load_disk()
            project = Migration("0001_initial", "tests")
            project.dependencies = [(APP, "0005_schedules")]
            self.disk_migrations["tests", "0001_initial"] = project

    graph = WithProjectMigration(None).graph
    assert graph.node_map["tests", "0001_initial"].parents == {graph.node_map[APP, "0001_initial"]}


def schema() -> dict:
    """The app's tables as the database describes them: columns in order, indexes and
    constraints (with their conditions where the database keeps them), and triggers."""
    with connection.cursor() as cursor:
        introspection = connection.introspection
        tables = sorted(name for name in introspection.table_names(cursor) if name.startswith(f"{APP}_"))
        found = {"tables": tables}
        for table in tables:
            found[table] = {
                "columns": [tuple(column) for column in introspection.get_table_description(cursor, table)],
                "constraints": introspection.get_constraints(cursor, table),
            }
        found.update(DEFINITIONS[connection.vendor](cursor, tables))
    return found


def sqlite_definitions(cursor, tables):
    placeholders = ", ".join(["%s"] * len(tables))
    cursor.execute(
        f"SELECT type, name, sql FROM sqlite_master WHERE tbl_name IN ({placeholders}) ORDER BY name", tables
    )
    return {"definitions": cursor.fetchall()}


def mysql_definitions(cursor, tables):
    definitions = []
    for table in tables:
        cursor.execute(f"SHOW CREATE TABLE {connection.ops.quote_name(table)}")
        definitions.append(re.sub(r" AUTO_INCREMENT=\d+", "", cursor.fetchone()[1]))  # a counter, not schema
    return {"definitions": definitions}


def postgresql_definitions(cursor, tables):
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) ORDER BY indexname", [tables]
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid::regclass::text = ANY(%s) ORDER BY conname",
        [tables],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger"
        " WHERE NOT tgisinternal AND tgrelid::regclass::text = ANY(%s) ORDER BY tgname",
        [tables],
    )
    triggers = cursor.fetchall()
    cursor.execute(
        "SELECT proname, pg_get_functiondef(oid) FROM pg_proc WHERE proname LIKE %s ORDER BY 1", ["dbjobs%"]
    )
    return {
        "indexes": indexes,
        "constraints": constraints,
        "triggers": triggers,
        "functions": cursor.fetchall(),
    }


DEFINITIONS = {"sqlite": sqlite_definitions, "mysql": mysql_definitions, "postgresql": postgresql_definitions}
