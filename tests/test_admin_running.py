"""No admin action touches running work: a real run_jobs process holds a job while each is posted."""

import signal

import pytest

from django_dbjobs import enqueue
from django_dbjobs.models import FailedJob, Job, JobStatus

from . import jobs
from .admin_helpers import action, staff
from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.slow
def test_every_action_leaves_a_running_job_alone(run_jobs, record_file, tmp_path):
    release = tmp_path / "release"
    job = enqueue(jobs.record_when_released, str(release), "finished")
    worker = run_jobs()
    assert wait_for(lambda: "started:finished" in record_file.read_text(), 20)
    held = Job.objects.get(pk=job.pk)
    assert held.status == JobStatus.RUNNING
    client = staff(superuser=True)
    jobs_url, dead_url = "/admin/django_dbjobs/job/", "/admin/django_dbjobs/failedjob/"

    responses = [
        action(client, jobs_url, "cancel", [held], post="yes"),
        client.post(f"{jobs_url}{job.pk}/delete/", {"post": "yes"}, follow=True),
        action(client, dead_url, "retry", [held]),
        action(client, dead_url, "delete_dead_letters", [held], post="yes"),
        client.post(f"{dead_url}{job.pk}/retry/", follow=True),
        client.post(f"{dead_url}{job.pk}/delete/", {"post": "yes"}, follow=True),
        client.post(f"{dead_url}retry-matching/", follow=True),
        client.post(f"{dead_url}delete-matching/", follow=True),
    ]
    assert [response.status_code for response in responses] == [200] * 8
    assert client.messages(responses[1]) == ["Nothing deleted: the job is no longer ready."]
    assert client.messages(responses[4]) == [
        "0 jobs queued again. 1 skipped: no longer failed (retried or deleted meanwhile)."
    ]
    assert client.messages(responses[0]) == [
        "0 ready jobs cancelled. 1 skipped: not ready (running or finished)."
    ]
    assert client.messages(responses[2]) == [
        "0 jobs queued again. 1 skipped: no longer failed (retried or deleted meanwhile)."
    ]
    assert FailedJob.objects.filter(pk=job.pk).retry_all().retried == 0
    assert FailedJob.objects.filter(pk=job.pk).delete_all() == (0, 0)
    assert Job.objects.filter(pk=job.pk).delete_ready() == 0

    still = Job.objects.get(pk=job.pk)
    assert (still.status, still.worker, still.attempts, still.pickups) == (
        JobStatus.RUNNING,
        held.worker,
        held.attempts,
        held.pickups,
    )
    release.touch()
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL).exists(), 20)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert record_file.read_text().split() == ["started:finished", "finished"]
