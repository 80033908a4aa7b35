"""What a worker leaves unloaded: code it never runs stays out of its memory (worker_checks.py,
migration_history.py), and memory it freed goes back to the system (heap_trim.py)."""

import sys

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus
from tests import jobs

NEVER_USED = [
    "tests.urls",  # the URLconf, and with it every view
    "django.db.migrations.autodetector",  # the migrate and makemigrations commands' checks
    "django.core.management.commands.migrate",
    "django.contrib.auth.migrations.0001_initial",  # other apps' migrations
    "django.contrib.contenttypes.migrations.0001_initial",
]


@pytest.mark.django_db(transaction=True)
def test_a_worker_imports_no_urlconf_no_migrate_command_and_no_other_apps_migrations(run_jobs):
    job = enqueue(jobs.loaded, NEVER_USED)
    worker = run_jobs("--burst")  # with Django's system checks, as run_jobs runs by default
    assert worker.wait() == 0, worker.output()
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESSFUL
    assert job.return_value == [], "the worker loaded code it never runs"


@pytest.mark.django_db(transaction=True)
def test_a_started_worker_no_longer_holds_the_migrations_it_checked(run_jobs):
    job = enqueue(jobs.loaded, ["django_dbjobs.migrations.0001_initial", "django_dbjobs.migrations"])
    worker = run_jobs("--burst")
    assert worker.wait() == 0, worker.output()
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESSFUL
    assert job.return_value == ["django_dbjobs.migrations"], "the worker kept the migrations it read"


@pytest.mark.django_db
def test_the_migration_check_keeps_migration_modules_imported_before_it():
    from django_dbjobs.db import migration_history

    migration_history.disk_migrations()  # as Django's MigrationLoader imports them
    initial = sys.modules["django_dbjobs.migrations.0001_initial"]
    migration_history.require_migrated()
    assert sys.modules["django_dbjobs.migrations.0001_initial"] is initial


MIGRATIONS = "django_dbjobs.migrations"


def migration_modules() -> list[str]:
    return [name for name in sys.modules if name.startswith(f"{MIGRATIONS}.")]


@pytest.fixture
def unimported_migrations():
    """This app's migration modules out of sys.modules, as in a worker's process; put back after."""
    kept = {name: sys.modules.pop(name) for name in migration_modules()}
    yield
    sys.modules.update(kept)
    for name, module in kept.items():
        setattr(sys.modules[MIGRATIONS], name.rpartition(".")[2], module)


@pytest.mark.django_db
def test_the_migration_check_forgets_the_migration_modules_it_imported(unimported_migrations):
    from django_dbjobs.db import migration_history

    migration_history.require_migrated()
    assert not migration_modules()
    assert not hasattr(sys.modules[MIGRATIONS], "0001_initial")


@pytest.mark.django_db
def test_migrations_read_ahead_are_forgotten_by_the_check_that_uses_them(unimported_migrations):
    from django_dbjobs.db import migration_history

    migration_history.read_migrations_ahead()
    assert f"{MIGRATIONS}.0001_initial" in sys.modules
    migration_history.require_migrated()
    assert not migration_modules()
    migration_history.disk_migrations()  # imported otherwise: kept
    migration_history.require_migrated()
    assert f"{MIGRATIONS}.0001_initial" in sys.modules


@pytest.mark.django_db
def test_run_jobs_still_runs_the_other_system_checks_and_leaves_the_registry_whole(settings):
    before = checks.registry.registry.get_checks(include_deployment_checks=True)
    settings.DBJOBS_POLL_INTERVAL = -1  # an error of dbjobs' own settings check (untagged)
    with pytest.raises(SystemCheckError, match="POLL_INTERVAL"):
        call_command("run_jobs", "--burst", skip_checks=False)
    assert not Job.objects.exists()
    # The registry keeps its checks in sets: the same checks, in whatever order they come.
    after = checks.registry.registry.get_checks(include_deployment_checks=True)
    assert len(after) == len(before) and set(after) == set(before)
    names = {check.__name__ for check in before}
    assert {"check_jobs", "check_url_config", "migrate_and_makemigrations_autodetector"} <= names
