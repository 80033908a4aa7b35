"""Batches and dependencies, run in this process (tests/test_workflow_workers.py: real workers)."""

import datetime

import pytest
from django.db import transaction
from django.utils import timezone

from django_dbjobs import batch, enqueue, enqueue_many
from django_dbjobs.exceptions import BatchFinished, InvalidJob
from django_dbjobs.models import Batch, Blocked, FailedJob, Job, JobDependency, JobStatus
from django_dbjobs.operations import retention
from django_dbjobs.testing import run_jobs
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)

CALLBACKS = {
    "on_success": jobs.batch_succeeded,
    "on_failure": jobs.batch_failed,
    "on_complete": jobs.batch_completed,
}


def lines(record_file):
    return record_file.read_text().split()


def test_a_batch_runs_its_success_and_complete_callbacks_once_with_its_counts(record_file):
    with batch(description="thumbs", **CALLBACKS) as opened:
        for n in range(3):
            enqueue(jobs.record, n)
    enqueue_many(jobs.record, [(10,), (11,)], batch=opened)
    assert Job.objects.filter(batch=opened).count() == 5
    run_jobs()
    recorded = lines(record_file)
    assert sorted(recorded[:5]) == ["0", "1", "10", "11", "2"]
    assert sorted(recorded[5:]) == ["complete:thumbs:5:5:0", "success:thumbs:5:5:0"]
    opened.refresh_from_db()
    assert (opened.total, opened.succeeded, opened.failed) == (5, 5, 0) and opened.finished_at is not None
    assert not Job.objects.filter(pk=opened.on_failure).exists(), (
        "the callback that does not apply is dropped"
    )


def test_a_batch_with_a_dead_letter_runs_its_failure_callback(record_file):
    with batch(description="mixed", **CALLBACKS):
        enqueue(jobs.record, "ok")
        enqueue(jobs.always_fails, max_attempts=1)
    run_jobs()
    assert sorted(lines(record_file)[1:]) == ["complete:mixed:2:1:1", "failure:mixed:2:1:1"]


def test_callbacks_wait_and_are_not_claimable_until_the_batch_finishes(record_file):
    with batch(on_complete=jobs.batch_completed) as opened:
        enqueue(jobs.record, "a")
    callback = Job.objects.get(pk=opened.on_complete)
    assert (callback.status, callback.blocked) == (JobStatus.READY, Blocked.AFTER)
    assert callback.batch_id is None, "a callback is not one of its batch's jobs"
    run_jobs()
    callback.refresh_from_db()
    assert callback.status == JobStatus.SUCCESSFUL and callback.args[0]["id"] == opened.pk


def test_an_empty_batch_finishes_at_once(record_file):
    with batch(description="empty", **CALLBACKS) as opened:
        pass
    opened.refresh_from_db()
    assert opened.finished_at is not None
    run_jobs()
    assert sorted(lines(record_file)) == ["complete:empty:0:0:0", "success:empty:0:0:0"]


def test_a_batch_in_a_rolled_back_transaction_leaves_nothing():
    with pytest.raises(RuntimeError), transaction.atomic():
        with batch(**CALLBACKS):
            enqueue(jobs.record, 1)
        raise RuntimeError("the caller's transaction rolls back")
    assert not Batch.objects.exists() and not Job.objects.exists()


def test_an_error_in_the_block_rolls_the_batch_back():
    with pytest.raises(ValueError), batch(**CALLBACKS):
        enqueue(jobs.record, 1)
        raise ValueError("boom")
    assert not Batch.objects.exists() and not Job.objects.exists()


def test_a_job_of_the_batch_adds_jobs_to_it_without_it_finishing_early(record_file):
    with batch(description="stages", on_complete=jobs.batch_completed) as opened:
        enqueue(jobs.fan_out, 3, "child")
    run_jobs()
    recorded = lines(record_file)
    assert recorded[-1] == "complete:stages:4:4:0", recorded
    assert sorted(recorded[:-1]) == ["child-0", "child-1", "child-2"]
    assert Job.objects.filter(batch=opened).count() == 4


def test_a_finished_batch_takes_no_more_jobs():
    with batch() as opened:
        pass
    with pytest.raises(BatchFinished):
        enqueue(jobs.record, 1, batch=opened)
    with pytest.raises(InvalidJob, match="no batch"):
        enqueue(jobs.record, 1, batch="nope")
    assert not Job.objects.exists()


def test_batches_do_not_nest_and_bad_input_writes_nothing():
    with pytest.raises(InvalidJob, match="do not nest"), batch(), batch():
        pass
    with pytest.raises(InvalidJob, match="description"):
        with batch(description="x" * 256):
            pass
    with pytest.raises(InvalidJob):
        with batch(on_success=jobs.not_registered):
            pass
    assert not Batch.objects.exists() and not Job.objects.exists()


def test_cancelling_a_ready_job_of_a_batch_counts_it_as_failed(record_file):
    with batch(description="c", **CALLBACKS) as opened:
        keep = enqueue(jobs.record, "kept")
        drop = enqueue(jobs.record, "dropped")
    assert Job.objects.filter(pk=drop.pk).cancel() == 1
    drop.refresh_from_db()
    assert drop.status == JobStatus.FAILED and "cancelled" in drop.last_error
    run_jobs()
    keep.refresh_from_db()
    assert keep.status == JobStatus.SUCCESSFUL
    assert sorted(lines(record_file)) == ["complete:c:2:1:1", "failure:c:2:1:1", "kept"]
    opened.refresh_from_db()
    assert (opened.succeeded, opened.failed) == (1, 1)


def test_retrying_a_dead_letter_of_an_unfinished_batch_takes_its_failure_back(record_file, tmp_path):
    broken = tmp_path / "broken"
    broken.touch()
    with batch(description="r", **CALLBACKS) as opened:
        first = enqueue(jobs.fails_while_exists, str(broken), max_attempts=1)
        enqueue(jobs.record, "later", delay=3600)
    run_jobs()
    opened.refresh_from_db()
    assert opened.failed == 1 and opened.finished_at is None
    broken.unlink()
    FailedJob.objects.get(pk=first.pk).retry()
    opened.refresh_from_db()
    assert opened.failed == 0
    run_jobs(include_scheduled=True)
    assert sorted(lines(record_file)) == ["complete:r:2:2:0", "later", "recovered", "success:r:2:2:0"]


def test_a_chain_runs_in_order(record_file):
    a = enqueue(jobs.record, "a")
    b = enqueue(jobs.record, "b", after=[a])
    c = enqueue(jobs.record, "c", after=[b.pk])
    assert Job.objects.get(pk=b.pk).blocked == Blocked.AFTER
    assert Job.objects.get(pk=a.pk).has_dependents and Job.objects.get(pk=b.pk).waiting_for == 1
    run_jobs()
    assert lines(record_file) == ["a", "b", "c"]
    assert list(JobDependency.objects.filter(job=c).values_list("upstream", flat=True)) == [b.pk]


def test_a_job_waits_for_all_it_depends_on(record_file):
    a = enqueue(jobs.record, "a", priority=-5)
    late = enqueue(jobs.record, "late", delay=3600)
    joined = enqueue(jobs.record, "joined", after=[a, late], priority=50)
    run_jobs()
    assert lines(record_file) == ["a"]
    assert Job.objects.get(pk=joined.pk).waiting_for == 1
    run_jobs(include_scheduled=True)
    assert lines(record_file) == ["a", "late", "joined"]


def test_a_dead_lettered_job_cancels_the_jobs_waiting_for_it_naming_it(record_file):
    a = enqueue(jobs.always_fails, max_attempts=1)
    b = enqueue(jobs.record, "b", after=[a])
    c = enqueue(jobs.record, "c", after=[b])
    enqueue(jobs.record, "anyway", after=[a], after_failure="run")
    run_jobs()
    assert lines(record_file) == ["anyway"]
    for waiting, cause in ((b, a), (c, b)):
        waiting.refresh_from_db()
        assert waiting.status == JobStatus.FAILED and waiting.attempts == 0
        assert waiting.errors[-1]["exception_class_path"] == "django_dbjobs.exceptions.DependencyFailed"
        assert cause.pk in waiting.last_error


def test_waiting_for_finished_jobs(record_file):
    done = enqueue(jobs.record, "done")
    failed = enqueue(jobs.always_fails, max_attempts=1)
    run_jobs()
    now = enqueue(jobs.record, "now", after=[done])
    assert Job.objects.get(pk=now.pk).blocked == Blocked.NONE
    cancelled = enqueue(jobs.record, "never", after=[failed])
    assert Job.objects.get(pk=cancelled.pk).status == JobStatus.FAILED
    run_jobs()
    assert lines(record_file) == ["done", "now"]


def test_a_running_job_that_gains_a_dependent_releases_it():
    a = enqueue(jobs.record, "a")
    (claimed,) = Job.objects.claim("w1", 1)
    assert not claimed.has_dependents
    b = enqueue(jobs.record, "b", after=[a])
    assert claimed.mark_succeeded("w1", None)  # its claimed row says it has no dependents
    b.refresh_from_db()
    assert (b.blocked, b.waiting_for) == (Blocked.NONE, None)


def test_a_batch_of_successes_with_a_job_that_gained_a_dependent_releases_it():
    a, other = enqueue(jobs.record, "a"), enqueue(jobs.record, "other")
    claimed = Job.objects.claim("w1", 2)
    b = enqueue(jobs.record, "b", after=[a])
    won = Job.objects.finish_successes("w1", [(job, None) for job in claimed])
    assert {job.pk for job in won} == {a.pk, other.pk}
    b.refresh_from_db()
    assert b.blocked == Blocked.NONE


def test_bad_dependencies_are_refused_and_write_nothing():
    a = enqueue(jobs.record, "a")
    with pytest.raises(InvalidJob, match="list of jobs"):
        enqueue(jobs.record, "b", after=a)
    with pytest.raises(InvalidJob, match="no job missing"):
        enqueue(jobs.record, "b", after=[a, "missing"])
    with pytest.raises(InvalidJob, match="after_failure"):
        enqueue(jobs.record, "b", after=[a], after_failure="maybe")
    assert list(Job.objects.values_list("pk", flat=True)) == [a.pk]
    assert not Job.objects.get(pk=a.pk).has_dependents and not JobDependency.objects.exists()


def age_batch(opened, days):
    old = timezone.now() - datetime.timedelta(days=days)
    Batch.objects.filter(pk=opened.pk).update(finished_at=old)
    Job.objects.filter(batch=opened).update(finished_at=old)


def test_retention_deletes_an_old_finished_batch_with_its_jobs_never_one_with_active_jobs(settings, caplog):
    settings.DBJOBS_KEEP_SUCCEEDED = 7 * 86400
    settings.DBJOBS_KEEP_FAILED = None  # dead letters forever: a batch with one stays
    with batch(description="old") as old:
        enqueue_many(jobs.noop, [(i,) for i in range(3)])
    with batch(description="recent") as recent:
        enqueue(jobs.noop, 0)
    with batch(description="busy") as busy:
        enqueue(jobs.noop, 0)
    with batch(description="failed") as failed:
        enqueue(jobs.always_fails, max_attempts=1)
    run_jobs()
    age_batch(old, 8)
    age_batch(busy, 8)
    age_batch(failed, 8)
    age_batch(recent, 6)
    waiting = enqueue(jobs.noop, 1, after=[Job.objects.filter(batch=old).first()])
    Job.objects.filter(batch=busy).update(status=JobStatus.READY)  # a dead letter retried, say
    assert retention.Pruner("default").prune_if_due() is None
    assert "prune" not in caplog.text, "the pruning round ended without an error"
    assert set(Batch.objects.values_list("description", flat=True)) == {"recent", "busy", "failed"}
    assert not Job.objects.filter(batch_id=old.pk).exists()
    assert Job.objects.filter(batch=busy).count() == 1 and Job.objects.filter(batch=failed).count() == 1
    assert JobDependency.objects.filter(job=waiting).count() == 1, "the waiting job's own edge stays"
    nine_days_ago = timezone.now() - datetime.timedelta(days=9)
    Job.objects.filter(pk=waiting.pk).update(status=JobStatus.SUCCESSFUL, finished_at=nine_days_ago)
    retention.prune(JobStatus.SUCCESSFUL, 7 * 86400)
    assert not JobDependency.objects.exists(), "edges go with their job"


def test_status_counts_open_batches_and_waiting_jobs_are_not_due():
    import io
    import json

    from django.core.management import call_command
    from django.core.management.base import CommandError

    with batch(description="open"):
        first = enqueue(jobs.noop, 1)
        enqueue(jobs.noop, 2, after=[first])
    with batch(description="done"):
        pass
    out = io.StringIO()
    with pytest.raises(CommandError):  # unhealthy: no worker serves the due job
        call_command("dbjobs_status", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["workflows"]["open_batches"] == 1
    assert report["workflows"]["oldest_open_batch_age_seconds"] >= 0
    (default,) = report["queues"]
    assert (default["ready_due"], default["ready_later"]) == (1, 1), "the waiting job is not due"


def test_batch_retention_keeps_a_dead_letter_kept_forever_and_stays_within_its_budget(settings, monkeypatch):
    from django_dbjobs.operations import batch_retention

    settings.DBJOBS_KEEP_SUCCEEDED = 7 * 86400
    settings.DBJOBS_KEEP_FAILED = None
    with batch(description="retried") as retried:
        enqueue(jobs.noop, 1)
    with batch(description="big") as big:
        enqueue_many(jobs.noop, [(i,) for i in range(25)])
    run_jobs()
    # A job of the finished batch, retried from the dead letters and failed again: the
    # batch's own counts say nothing failed, but a dead letter kept forever is there.
    Job.objects.filter(batch=retried).update(status=JobStatus.FAILED)
    age_batch(retried, 8)
    age_batch(big, 8)
    monkeypatch.setattr(batch_retention, "CHUNK", 10)
    assert batch_retention.delete_old_batches(7 * 86400, None, chunks=2) == 0  # 20 of its 25 jobs
    assert Job.objects.filter(batch=big).count() == 5
    assert batch_retention.delete_old_batches(7 * 86400, None, chunks=2) == 1
    assert set(Batch.objects.values_list("description", flat=True)) == {"retried"}
    assert Job.objects.filter(batch=retried).count() == 1


def test_cancelling_a_batch_job_waiting_for_its_retry_keeps_its_earlier_errors(settings):
    # The retry is not due before run_jobs() looks again, however slow the machine (the
    # test settings' 0.05 s backoff let a slow CI run take the second attempt too).
    settings.DBJOBS_RETRY_BACKOFF = settings.DBJOBS_RETRY_BACKOFF_MAX = 3600
    with batch():
        retrying = enqueue(jobs.always_fails, max_attempts=3)
    run_jobs()
    retrying.refresh_from_db()
    assert (retrying.status, len(retrying.errors)) == (JobStatus.READY, 1)
    assert Job.objects.filter(pk=retrying.pk).cancel() == 1
    retrying.refresh_from_db()
    assert retrying.status == JobStatus.FAILED
    assert [error["summary"] for error in retrying.errors] == [
        "ValueError: boom",
        "JobCancelled: cancelled before it ran",
    ]
