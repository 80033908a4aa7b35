"""Every documented public name imports from its documented path (the layout moves nothing users see)."""

import importlib
import importlib.metadata

import pytest

PUBLIC = {
    "django_dbjobs": [
        "job",
        "JobFunction",
        "enqueue",
        "aenqueue",
        "prepare",
        "bulk_enqueue",
        "enqueue_many",
        "current_job",
    ],
    "django_dbjobs.context": ["current_job"],
    "django_dbjobs.testing": ["run_jobs", "capture_jobs", "TEST_WORKER"],
    "django_dbjobs.signals": ["job_enqueued", "job_started", "job_finished", "job_failed", "schedule_fired"],
    "django_dbjobs.exceptions": [
        "DbJobsError",
        "InvalidJob",
        "UnknownJob",
        "UnknownOption",
        "InvalidJobArguments",
        "PayloadTooLarge",
        "InvalidJobContext",
        "UnsupportedDatabase",
        "MissingMigrations",
        "WorkerLost",
        "InvalidSchedule",
        "JobTimeout",
        "JobCancelled",
        "JobInterrupted",
        "UnimportedJobWarning",
        "UnservedQueueWarning",
        "DependencyCycle",
    ],
    "django_dbjobs.backend": ["DatabaseBackend", "DatabaseTask"],
    "django_dbjobs.db": ["SQLITE_RECOMMENDED_OPTIONS"],
    "django_dbjobs.models": [
        "Job",
        "JobStatus",
        "FailedJob",
        "Schedule",
        "ScheduleTick",
        "Queue",
        "WorkerProcess",
        "ConcurrencyKey",
        "RateSlot",
    ],
    "django_dbjobs.cron.missed_runs": ["MAX_CATCH_UP"],
    "django_dbjobs.worker": ["Worker"],
}


@pytest.mark.parametrize(
    ("module", "name"), [(module, name) for module, names in PUBLIC.items() for name in names]
)
def test_a_documented_name_imports_from_its_documented_path(module, name):
    assert getattr(importlib.import_module(module), name) is not None


def test_the_root_names_are_the_enqueuing_ones():
    import django_dbjobs
    from django_dbjobs import enqueuing

    for name in ("job", "JobFunction", "enqueue", "aenqueue", "prepare", "bulk_enqueue", "enqueue_many"):
        assert getattr(django_dbjobs, name) is getattr(enqueuing, name)
    assert django_dbjobs.enqueue.__module__ == "django_dbjobs.enqueuing.api", (
        "a function, never the subpackage"
    )
    with pytest.raises(AttributeError):
        django_dbjobs.not_a_name  # noqa: B018


def test_the_pytest_plugin_entry_point_and_the_migrations_references_resolve():
    (entry,) = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "django_dbjobs"]
    assert entry.value == "django_dbjobs.pytest_plugin" and entry.load()
    migration = importlib.import_module("django_dbjobs.migrations.0001_initial")
    assert migration.Migration.operations
    from django_dbjobs.models.ids import new_id

    assert len(new_id()) == 36


@pytest.mark.django_db(transaction=True)
def test_job_signals_are_sent_with_sender_job_as_documented():
    from django_dbjobs import enqueue, signals
    from django_dbjobs.models import Job
    from django_dbjobs.testing import run_jobs
    from tests import jobs

    senders = []
    receiver = lambda sender, **kwargs: senders.append(sender)  # noqa: E731
    signals.job_finished.connect(receiver, sender=Job, weak=False)
    try:
        enqueue(jobs.add, 1, 2)
        run_jobs()
    finally:
        signals.job_finished.disconnect(receiver, sender=Job)
    assert senders == [Job]
