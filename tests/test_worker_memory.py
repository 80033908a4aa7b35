"""What a worker leaves unloaded: code it never runs stays out of its memory (worker_checks.py,
migration_history.py)."""

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
