"""The migrations agree with the models, make the claim index and PostgreSQL's triggers, and
load beside project migrations that depend on the ones the initial migration replaced.

The squash itself (the schema of the old chains, a database they made) is tested in
test_migration_history.py.
"""

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations import Migration
from django.db.migrations.loader import MigrationLoader
from django.test.utils import override_settings

from django_dbjobs import db
from django_dbjobs.models import Job
from tests.migration_chains import APP, SEVEN, latest, schema


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


@pytest.mark.skipif(connection.vendor != "postgresql", reason="NOTIFY triggers exist on PostgreSQL only")
def test_a_queue_paused_or_resumed_notifies_workers_and_the_trigger_goes_with_its_migration(chains):
    """A statement that may change which queues are paused NOTIFYs 'queues'
    (worker/claiming/paused_queues.py); a worker's LISTEN connection trusts what it hears
    only where the trigger is. The initial migration makes it and its reverse drops it;
    0006 of the seven migrations made it, and workers could start before that one."""
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

    def trigger_and_function() -> tuple[bool, bool]:
        found = schema()
        return trigger in dict(found["triggers"]), "dbjobs_notify_payload" in dict(found["functions"])

    trigger = "dbjobs_queue_changed"
    chains("0005_workflows_index", SEVEN)
    assert trigger_and_function() == (False, False) and not hears_queues()
    with override_settings(MIGRATION_MODULES={APP: SEVEN}):
        assert db.pending_migrations() == [], "workers may start before 0006"
    chains("0007_dependency_uncounted_index", SEVEN)
    assert trigger_and_function() == (True, True) and hears_queues()
    chains(None, SEVEN)

    chains(latest())
    listener = Listening()
    try:
        Queue.objects.pause(["emails"])
        Queue.objects.resume(["emails"])
        Queue.objects.all().delete()
        heard = listener.payloads(1.0)
    finally:
        listener.close()
    assert heard == ["queues"] * 4, "the insert and update of pause(), resume(), delete()"
    assert trigger_and_function() == (True, True) and hears_queues()
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE django_dbjobs_queue DISABLE TRIGGER {trigger}")
    try:
        assert not hears_queues(), "disabled: a pause would go unheard"
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE django_dbjobs_queue ENABLE TRIGGER {trigger}")
    chains(None)
    assert trigger_and_function() == (False, False) and not hears_queues()


@pytest.mark.parametrize("old", ["0005_schedules", "0007_dependency_uncounted_index"])
def test_a_project_migration_that_depends_on_an_old_migration_follows_the_initial_one(old):
    """Such as one adding a foreign key to Schedule, made against 0005_schedules (of the
    nine) or against 0007_dependency_uncounted_index (of the seven)."""

    class WithProjectMigration(MigrationLoader):
        def load_disk(self):
            super().load_disk()
            project = Migration("0001_initial", "tests")
            project.dependencies = [(APP, old)]
            self.disk_migrations["tests", "0001_initial"] = project

    graph = WithProjectMigration(None).graph
    assert graph.node_map["tests", "0001_initial"].parents == {graph.node_map[APP, "0001_initial"]}
