"""The one initial migration: it makes what the development versions' migrations made, finds a
database they made complete (or refuses one they left half done), and unapplies to nothing.

The old chains are fixtures (tests/old_migrations: the nine of the development releases;
tests/seven_migrations: the seven that followed), used through ``MIGRATION_MODULES``.
"""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from django_dbjobs import db, enqueue
from django_dbjobs.db import migration_history
from django_dbjobs.models import JobStatus
from tests import jobs
from tests.migration_chains import (
    APP,
    NINE,
    SEVEN,
    assert_same_schema,
    latest,
    recorded,
    schema,
)

NINE_AFTER_FIRST = [
    "0002_unique_keys",
    "0003_notify_trigger",
    "0004_crash_accounting",
    "0005_schedules",
    "0006_queues_dead_letters",
    "0007_admin_indexes",
    "0008_enqueuer_context",
    "0009_leaner_job_indexes",
]
SEVEN_AFTER_FIRST = [
    "0002_flow_control",
    "0003_flow_control_indexes",
    "0004_workflows",
    "0005_workflows_index",
    "0006_queue_notify",
    "0007_dependency_uncounted_index",
]
#: What a database that ran either chain to its end records.
EVERY_OLD_MIGRATION = {"0001_initial", *NINE_AFTER_FIRST, *SEVEN_AFTER_FIRST}


#: The migrations made after the initial one replaced the old chains.
AFTER_INITIAL = [
    "0002_trace_context_and_failure_cause",
    "0003_cause_and_live_job_indexes",
    "0004_failure_causes_of_old_dead_letters",
    "0005_job_table_autovacuum",
    "0006_progress_and_checkpoint",
]


def test_the_initial_migration_replaces_every_other_and_only_new_ones_follow_it():
    loader = MigrationLoader(None)
    assert sorted(name for app, name in loader.disk_migrations if app == APP) == [
        "0001_initial",
        *AFTER_INITIAL,
    ]
    replaced = [name for _app, name in loader.get_migration(APP, "0001_initial").replaces]
    assert replaced == NINE_AFTER_FIRST + SEVEN_AFTER_FIRST


def test_a_fresh_database_gets_the_schema_the_seven_migrations_made(chains):
    chains("0001_initial")
    fresh = schema()
    assert recorded() == EVERY_OLD_MIGRATION
    chains(None)
    chains("0007_dependency_uncounted_index", SEVEN)
    assert_same_schema(fresh, schema())
    job_indexes = fresh["django_dbjobs_job"]["constraints"]
    assert {
        "dbjobs_job_claimable_idx",
        "dbjobs_job_batch_idx",
        "dbjobs_job_running_idx",
    } <= job_indexes.keys()
    assert "dbjobs_job_claim_idx" not in job_indexes  # dropped by 0003 of the seven, never made now
    uncounted = fresh["django_dbjobs_jobdependency"]["constraints"]["dbjobs_dep_uncounted_idx"]
    if connection.features.supports_partial_indexes:
        assert uncounted["columns"] == ["job_id", "upstream"]  # partial: WHERE NOT counted
    else:
        assert uncounted["columns"] == ["counted", "job_id", "upstream"]
    if connection.vendor == "postgresql":
        assert [name for name, _definition in fresh["triggers"]] == [
            "dbjobs_job_inserted",
            "dbjobs_job_ready_again",
            "dbjobs_queue_changed",
            "dbjobs_schedule_changed",
        ]
        assert ("dbjobs_dep_uncounted_idx", PARTIAL_UNCOUNTED) in fresh["indexes"]
        assert not [name for name in job_indexes if name.endswith("_like")]


PARTIAL_UNCOUNTED = (
    "CREATE INDEX dbjobs_dep_uncounted_idx ON public.django_dbjobs_jobdependency"
    " USING btree (job_id, upstream) WHERE (NOT counted)"
)


@pytest.mark.parametrize(
    "history",
    [
        [(SEVEN, "0007_dependency_uncounted_index")],
        [(NINE, "0009_leaner_job_indexes"), (SEVEN, "0007_dependency_uncounted_index")],
    ],
    ids=["seven", "nine then seven"],
)
def test_a_database_the_old_migrations_made_needs_nothing_runs_jobs_and_unapplies(chains, run_jobs, history):
    for chain, target in history:
        chains(target, chain)
    made_by_old = schema()
    assert recorded() == EVERY_OLD_MIGRATION
    executor = MigrationExecutor(connection)
    assert executor.migration_plan([(APP, "0001_initial")]) == []
    assert migration_history.missing_replaced_migrations() == []
    # Only the new ones workers need: 0003 only adds an index, 0004 only fills in causes,
    # 0005 only sets autovacuum.
    assert db.pending_migrations() == [f"{APP}.{AFTER_INITIAL[0]}", f"{APP}.{AFTER_INITIAL[4]}"]
    call_command("migrate", APP, "0001_initial", skip_checks=False, verbosity=0)  # checks pass, nothing to do
    assert recorded() == EVERY_OLD_MIGRATION
    assert_same_schema(schema(), made_by_old)
    call_command("migrate", APP, verbosity=0)
    made_by_old = schema()  # and the migrations after the initial one
    job = enqueue(jobs.add, 2, 3)
    worker = run_jobs("--burst")
    assert worker.wait() == 0, worker.output()
    job.refresh_from_db()
    assert (job.status, job.return_value) == (JobStatus.SUCCESSFUL, 5)

    chains(None)  # the initial migration unapplied: nothing of the app is left
    assert recorded() == set()
    nothing = schema()
    assert nothing["tables"] == [] and not nothing.get("triggers") and not nothing.get("functions")
    chains(latest())
    assert_same_schema(schema(), made_by_old)


@pytest.mark.parametrize(
    "chain, applied, missing",
    [
        (NINE, "0001_initial", NINE_AFTER_FIRST + SEVEN_AFTER_FIRST),
        (NINE, "0006_queues_dead_letters", NINE_AFTER_FIRST[5:] + SEVEN_AFTER_FIRST),
        (NINE, "0009_leaner_job_indexes", SEVEN_AFTER_FIRST),
        (SEVEN, "0003_flow_control_indexes", SEVEN_AFTER_FIRST[2:]),
    ],
    ids=["nine at 0001", "nine at 0006", "nine", "seven at 0003"],
)
def test_a_database_with_only_some_old_migrations_is_refused_with_what_to_do(chains, chain, applied, missing):
    chains(applied, chain)
    before = schema()
    assert migration_history.missing_replaced_migrations() == missing
    with pytest.raises(SystemCheckError, match=r"dbjobs\.E030") as refused:
        call_command("migrate", APP, skip_checks=False, verbosity=0)
    assert "Install the django-dbjobs version you upgraded from" in str(refused.value)
    assert f"{missing[0]}, " in str(refused.value) or len(missing) == 1
    assert schema() == before
    # run_jobs stops with "Run `python manage.py migrate`", which then says the above.
    assert db.pending_migrations() == [f"{APP}.{name}" for name in missing]
