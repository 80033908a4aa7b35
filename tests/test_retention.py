"""Retention: finished jobs deleted after DBJOBS_KEEP_*, in batches, never a ready or running job."""

import datetime
import io
import logging
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbjobs.checks import check_settings
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.operations import retention
from django_dbjobs.worker import Worker

pytestmark = pytest.mark.django_db(transaction=True)
DAY = datetime.timedelta(days=1)


def make(status, age_days, count=1, queue="default"):
    finished = timezone.now() - age_days * DAY if status in (JobStatus.SUCCESSFUL, JobStatus.FAILED) else None
    Job.objects.bulk_create(
        Job(name="tests.jobs.add", status=status, queue=queue, finished_at=finished, worker="w")
        for _ in range(count)
    )


def statuses():
    return sorted(Job.objects.values_list("status", flat=True))


def test_prune_deletes_only_finished_jobs_past_their_keep_time():
    make(JobStatus.SUCCESSFUL, 8)
    make(JobStatus.SUCCESSFUL, 6)
    make(JobStatus.FAILED, 31)
    make(JobStatus.FAILED, 8)
    make(JobStatus.READY, 0)
    make(JobStatus.RUNNING, 0)
    # READY/RUNNING rows with an old finish time, as a fault or a hand edit could leave them.
    Job.objects.create(name="tests.jobs.add", status=JobStatus.READY, finished_at=timezone.now() - 90 * DAY)
    Job.objects.create(name="tests.jobs.add", status=JobStatus.RUNNING, finished_at=timezone.now() - 90 * DAY)
    assert retention.prune(JobStatus.SUCCESSFUL, retention.kept_for(JobStatus.SUCCESSFUL)) == 1
    assert retention.prune(JobStatus.FAILED, retention.kept_for(JobStatus.FAILED)) == 1
    assert statuses() == ["FAILED", "READY", "READY", "RUNNING", "RUNNING", "SUCCESSFUL"]


def test_prune_deletes_in_batches_one_statement_each():
    make(JobStatus.SUCCESSFUL, 10, count=25)
    make(JobStatus.SUCCESSFUL, 1, count=3)
    totals = []
    with CaptureQueriesContext(connection) as queries:
        deleted = retention.prune(JobStatus.SUCCESSFUL, 5 * 86400, batch_size=10, progress=totals.append)
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("DELETE")]
    assert deleted == 25 and totals == [10, 20, 25]
    assert len(deletes) == 3  # 10 + 10 + 5; then one read finds nothing left
    assert Job.objects.count() == 3


def test_a_job_that_left_the_status_meanwhile_is_never_deleted(monkeypatch):
    make(JobStatus.FAILED, 40, count=2)
    retried = Job.objects.first()
    real = retention.old_jobs

    def stale_read(*args, **kwargs):  # as if the rows were read just before an operator's retry
        rows = real(*args, **kwargs)
        Job.objects.filter(pk=retried.pk).update(status=JobStatus.READY)
        return rows

    monkeypatch.setattr(retention, "old_jobs", stale_read)
    assert retention.delete_batch(JobStatus.FAILED, 30 * 86400) == 1
    assert list(Job.objects.values_list("pk", "status")) == [(retried.pk, JobStatus.READY)]


def test_queues_and_none_settings(settings):
    make(JobStatus.SUCCESSFUL, 10, queue="emails")
    make(JobStatus.SUCCESSFUL, 10, queue="default")
    assert retention.prune(JobStatus.SUCCESSFUL, 86400, queues=["emails"]) == 1
    assert list(Job.objects.values_list("queue", flat=True)) == ["default"]
    settings.DBJOBS_KEEP_SUCCEEDED = None
    assert retention.kept_for(JobStatus.SUCCESSFUL) is None
    settings.DBJOBS_KEEP_SUCCEEDED = datetime.timedelta(hours=1)
    assert retention.kept_for(JobStatus.SUCCESSFUL) == 3600


def test_a_pruning_error_never_stops_the_worker(settings, caplog):
    settings.DBJOBS_KEEP_SUCCEEDED = float("inf")  # refused by the check, but set anyway
    make(JobStatus.SUCCESSFUL, 8)
    retention.Pruner("default").prune_if_due()  # logged, not raised
    assert "Could not prune finished jobs" in caplog.text
    enqueue_and_run = Worker(burst=True)
    enqueue_and_run.run()  # a worker with the bad setting still runs


def test_workers_pruning_at_once_take_different_batches():
    from django.db import connections

    from django_dbjobs import db

    if not db.can_skip_locked("default"):
        pytest.skip("SQLite has one writer: pruners take turns instead")
    make(JobStatus.SUCCESSFUL, 10, count=6)
    other = connections.create_connection("default")  # a second, real connection: another worker
    try:
        other.set_autocommit(False)
        held = set(Job.objects.order_by("finished_at", "id").values_list("pk", flat=True)[:2])
        with other.cursor() as cursor:  # it holds the two oldest rows locked (by key), mid-batch
            table = Job._meta.db_table
            cursor.execute(f"SELECT id FROM {table} WHERE id IN (%s, %s) FOR UPDATE", list(held))  # noqa: S608
        with connection.cursor() as cursor:  # were it to wait for those locks, fail instead of hanging
            if connection.vendor == "postgresql":
                cursor.execute("SET lock_timeout = '5s'")
            else:
                cursor.execute("SET SESSION innodb_lock_wait_timeout = 5")
        started = time.monotonic()
        deleted = retention.delete_batch(JobStatus.SUCCESSFUL, 86400, batch_size=10)
        assert time.monotonic() - started < 3, "the batch waited for rows another pruner holds"
        if connection.vendor == "mysql" and connection.mysql_is_mariadb:
            # MariaDB's SKIP LOCKED may pass over free rows too while others are locked
            # (docs/installation.rst): this round may take nothing; the next one will.
            assert deleted in (0, 4)
        else:
            assert deleted == 4
        assert held <= set(Job.objects.values_list("pk", flat=True))
        other.rollback()
        deleted += retention.delete_batch(JobStatus.SUCCESSFUL, 86400, batch_size=10)
        assert deleted == 6 and not Job.objects.exists()
    finally:
        other.rollback()
        other.close()


def test_workers_prune_a_batch_per_round_and_full_batches_while_behind(settings, monkeypatch, caplog):
    settings.DBJOBS_KEEP_FAILED = None  # kept forever
    monkeypatch.setattr(retention, "BATCH_SIZE", 4)
    monkeypatch.setattr(retention, "ROUND_BUDGET", 0)  # no time for a second batch in a round
    make(JobStatus.SUCCESSFUL, 8, count=6)
    make(JobStatus.FAILED, 400, count=2)
    pruner = retention.Pruner("default")
    pruner.prune_if_due()
    assert Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 2
    pruner.prune_if_due()  # a full batch: the next round comes a moment later, not at once
    assert Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 2
    assert 0 < pruner._next - time.monotonic() <= retention.CATCH_UP_INTERVAL
    pruner._next = 0
    pruner.prune_if_due()
    assert statuses() == ["FAILED", "FAILED"]
    assert pruner._next - time.monotonic() > retention.PRUNE_INTERVAL / 2  # caught up: a minute

    # With time left in its round, a worker deletes full batches until one comes back short,
    # and says so in one line.
    monkeypatch.setattr(retention, "ROUND_BUDGET", 60)
    make(JobStatus.SUCCESSFUL, 8, count=9)
    pruner._next = 0
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="django_dbjobs"):
        pruner.prune_if_due()
    assert statuses() == ["FAILED", "FAILED"]
    assert [record.getMessage() for record in caplog.records if "Pruned" in record.getMessage()] == [
        "Pruned finished jobs status=SUCCESSFUL deleted=9 older_than=604800.0s"
    ]
    make(JobStatus.SUCCESSFUL, 8, count=1)
    Worker(burst=True).run()  # a worker prunes as it goes
    assert statuses() == ["FAILED", "FAILED"]


def test_a_worker_catching_up_logs_once_a_minute(settings, monkeypatch, caplog):
    settings.DBJOBS_KEEP_FAILED = None
    monkeypatch.setattr(retention, "BATCH_SIZE", 2)
    monkeypatch.setattr(retention, "ROUND_BUDGET", 0)
    make(JobStatus.SUCCESSFUL, 8, count=7)
    pruner = retention.Pruner("default")
    with caplog.at_level(logging.INFO, logger="django_dbjobs"):
        for _ in range(4):  # 2 + 2 + 2 behind, then the last one: caught up
            pruner._next = 0
            pruner.prune_if_due()
    lines = [record.getMessage() for record in caplog.records if "Pruned" in record.getMessage()]
    assert lines == [
        "Pruned finished jobs status=SUCCESSFUL deleted=2 older_than=604800.0s",  # the first round
        "Pruned finished jobs status=SUCCESSFUL deleted=5 older_than=604800.0s",  # the rest, at the end
    ]
    assert not Job.objects.exists()


def call(*args, tty=False):
    out = io.StringIO()
    out.isatty = lambda: tty
    call_command("prune_jobs", *args, stdout=out)
    return out.getvalue()


def test_prune_jobs_command_dry_run_then_delete():
    make(JobStatus.SUCCESSFUL, 8, count=3)
    make(JobStatus.FAILED, 31, count=2)
    make(JobStatus.FAILED, 2)
    text = call("--dry-run")
    assert "successful: would delete 3 jobs older than 1w." in text
    assert "failed: would delete 2 jobs older than 30d." in text
    assert Job.objects.count() == 6
    text = call()
    assert "successful: deleted 3 jobs" in text and "failed: deleted 2 jobs" in text
    assert statuses() == ["FAILED"]


def test_prune_jobs_options(settings):
    make(JobStatus.SUCCESSFUL, 2, queue="emails")
    make(JobStatus.SUCCESSFUL, 2, queue="default")
    make(JobStatus.FAILED, 2, queue="emails")
    assert "deleted 1 jobs older than 1d" in call(
        "--older-than", "1d", "--queue", "emails", "--status", "successful"
    )
    assert sorted(Job.objects.values_list("queue", "status")) == [
        ("default", "SUCCESSFUL"),
        ("emails", "FAILED"),
    ]
    settings.DBJOBS_KEEP_FAILED = None
    assert "kept forever" in call("--status", "failed")
    text = call("--older-than", "1d")  # an age for every status does not override "keep forever"
    assert "failed: kept forever" in text and "--status failed deletes them" in text
    assert Job.objects.filter(status=JobStatus.FAILED).count() == 1
    assert "deleted 1 jobs" in call("--older-than", "1d", "--status", "failed")
    for bad in (["--older-than", "soon"], ["--queues", "no spaces"], ["--batch-size", "0"]):
        with pytest.raises(CommandError):
            call(*bad)


def test_prune_jobs_takes_queues_as_the_other_commands_do():
    for queue in ("emails", "reports", "default"):
        make(JobStatus.SUCCESSFUL, 2, queue=queue)
    assert "deleted 2 jobs" in call("--older-than", "1d", "--queues", "emails,reports")
    assert list(Job.objects.values_list("queue", flat=True)) == ["default"]
    make(JobStatus.SUCCESSFUL, 2, queue="emails")
    assert "deleted 1 jobs" in call("--older-than", "1d", "--queue", "emails"), "the old spelling still works"
    assert list(Job.objects.values_list("queue", flat=True)) == ["default"]


def test_prune_jobs_draws_a_progress_bar_on_a_terminal():
    make(JobStatus.SUCCESSFUL, 8, count=5)
    text = call("--status", "successful", "--batch-size", "2", tty=True)
    assert "\rsuccessful: 2/5 [" in text and "\rsuccessful: 5/5 [" in text and "100%" in text
    assert "\r" not in call("--status", "successful")  # not a terminal: plain lines only


def test_keep_settings_are_checked(settings):
    settings.DBJOBS_KEEP_SUCCEEDED = -1
    settings.DBJOBS_KEEP_FAILED = "30 days"
    assert [e.id for e in check_settings() if e.id == "dbjobs.E025"] == ["dbjobs.E025", "dbjobs.E025"]
    settings.DBJOBS_KEEP_SUCCEEDED = float("inf")  # "forever" is None: infinity would overflow
    settings.DBJOBS_KEEP_FAILED = 1e15
    assert [e.id for e in check_settings() if e.id == "dbjobs.E025"] == ["dbjobs.E025", "dbjobs.E025"]
    settings.DBJOBS_KEEP_SUCCEEDED = datetime.timedelta(days=1)
    settings.DBJOBS_KEEP_FAILED = None
    assert not [e for e in check_settings() if e.id == "dbjobs.E025"]
