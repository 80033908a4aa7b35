"""A batch's callback cancelled while it waited, then retried (models/failed_job.py): it runs
with its batch's summary, never the placeholder it was stored with."""

import pytest

from django_dbjobs import batch, enqueue
from django_dbjobs.models import Batch, Blocked, FailedJob, Job, JobStatus
from django_dbjobs.testing import run_jobs
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def cancelled_callback(description):
    with batch(description=description, on_complete=jobs.batch_completed) as opened:
        enqueue(jobs.record, "a")
        enqueue(jobs.always_fails, max_attempts=1)
    assert Job.objects.filter(pk=opened.on_complete).cancel() == 1
    callback = Job.objects.get(pk=opened.on_complete)
    assert (callback.status, callback.args) == (JobStatus.FAILED, [{}])  # the placeholder
    return opened, callback


def test_a_callback_cancelled_and_retried_after_its_batch_finished_runs_with_its_summary(record_file):
    opened, callback = cancelled_callback("late")
    run_jobs()
    assert "complete:late:2:1:1" not in record_file.read_text()  # cancelled: not released
    assert FailedJob.objects.get(pk=callback.pk).retry().retried == 1
    opened = Batch.objects.get(pk=opened.pk)
    assert Job.objects.get(pk=callback.pk).args == [opened.summary()]
    (ran,) = run_jobs()
    assert (ran.pk, ran.status) == (callback.pk, JobStatus.SUCCESSFUL)
    assert record_file.read_text().split()[-1] == "complete:late:2:1:1"


def test_a_callback_cancelled_and_retried_before_its_batch_finished_waits_for_it(record_file):
    opened, callback = cancelled_callback("early")
    assert FailedJob.objects.get(pk=callback.pk).retry().retried == 1
    waiting = Job.objects.get(pk=callback.pk)
    assert (waiting.status, waiting.blocked, waiting.waiting_for) == (JobStatus.READY, Blocked.AFTER, 1)
    run_jobs()
    assert Job.objects.get(pk=callback.pk).status == JobStatus.SUCCESSFUL
    assert record_file.read_text().split().count("complete:early:2:1:1") == 1


def test_retrying_a_callback_with_other_dead_letters_changes_only_the_callback(record_file):
    opened, callback = cancelled_callback("mixed")
    run_jobs()
    failed = FailedJob.objects.exclude(pk=callback.pk).get()
    assert FailedJob.objects.filter(pk__in=[callback.pk, failed.pk]).retry_all().retried == 2
    assert Job.objects.get(pk=failed.pk).args == failed.args
    assert Job.objects.get(pk=callback.pk).args == [Batch.objects.get(pk=opened.pk).summary()]
