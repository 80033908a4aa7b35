"""The dead-letter page: Retry and Delete as actions, buttons and for everything matching a filter."""

import datetime
import re

import pytest
from django.utils import timezone

from django_dbjobs.models import FailedJob, Job, JobStatus

from .admin_helpers import action, failed_job, staff, text, visible

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/admin/django_dbjobs/failedjob/"


def test_dead_letters_list_only_failed_jobs_newest_first_with_their_error():
    older = failed_job(last_error="ValueError: older one")
    newer = failed_job(last_error="KeyError: newer one")
    # Enqueued first, failed last: listed first (by failure time, not by id).
    Job.objects.filter(pk=newer.pk).update(finished_at=timezone.now() - datetime.timedelta(minutes=5))
    Job.objects.filter(pk=older.pk).update(finished_at=timezone.now() - datetime.timedelta(minutes=1))
    Job.objects.create(name="tests.jobs.add", args=[1, 2])
    client = staff(superuser=True)
    page = text(client.get(LIST))
    assert "ValueError: older one" in page and "KeyError: newer one" in page
    assert page.index("ValueError: older one") < page.index("KeyError: newer one")
    rows = page.split('id="result_list"')[1].split("<tbody>")[1].split("</tbody>")[0]
    assert rows.count("<tr") == 2 and "tests.jobs.add" not in rows
    assert newer.pk[-12:] in page


def job_rows(page: str) -> dict[str, str]:
    """The job list's rows as a reader sees them, by the job id they show."""
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page.split('id="result_list"')[1], flags=re.S)
    shown = {}
    for row in rows:
        ids = re.findall(r'<code class="dbjobs-id">(.*?)</code>', row)
        if ids:
            shown[re.sub(r"<[^>]+>", "", ids[0])] = visible(row)
    return shown


def test_a_retried_dead_letter_shows_its_old_error_as_the_previous_attempts_not_as_current():
    retried, running, dead = failed_job(), failed_job(), failed_job()
    FailedJob.objects.filter(pk__in=[retried.pk, running.pk]).retry_all()
    Job.objects.filter(pk=running.pk).update(status=JobStatus.RUNNING, worker="w:1:a", attempts=1)
    client = staff(superuser=True)
    rows = job_rows(client.get("/admin/django_dbjobs/job/").content.decode())
    for pk in (retried.pk, running.pk):
        assert "previous attempt: RuntimeError: boom" in rows[pk], rows[pk]
    assert "RuntimeError: boom" in rows[dead.pk] and "previous attempt" not in rows[dead.pk]
    detail = visible(client.get(f"/admin/django_dbjobs/job/{retried.pk}/change/").content.decode())
    assert "RuntimeError: boom" in detail and "Attempt 3 failed" in detail, "its page keeps the history"


def test_retry_action_queues_dead_letters_again_with_their_history(caplog):
    jobs = [failed_job(), failed_job()]
    client = staff(superuser=True)
    with caplog.at_level("INFO", logger="django_dbjobs"):
        response = action(client, LIST, "retry", jobs)
    assert "Admin retried dead letters retried=2 skipped=0 by=ops" in caplog.text
    assert response.status_code == 200
    assert "2 jobs queued again." in client.messages(response)
    for job in Job.objects.filter(pk__in=[j.pk for j in jobs]):
        assert job.status == JobStatus.READY
        assert job.attempts == 0 and job.worker is None and job.finished_at is None
        assert job.errors and job.errors[0]["summary"] == "RuntimeError: boom"  # history kept
    assert Job.objects.due().count() == 2


def test_a_second_retry_of_the_same_jobs_is_skipped_and_reported():
    job = failed_job()
    client = staff(superuser=True)
    action(client, LIST, "retry", [job])
    # The same form posted again (a double submit): the row is READY now.
    response = client.post(
        LIST, {"action": "retry", "_selected_action": [job.pk], "index": 0, "select_across": 0}, follow=True
    )
    assert client.messages(response) == [
        "0 jobs queued again. 1 skipped: no longer failed (retried or deleted meanwhile)."
    ]
    assert Job.objects.get(pk=job.pk).status == JobStatus.READY


def test_retry_skips_a_job_whose_unique_key_another_active_job_holds():
    held = failed_job(name="tests.jobs.add", unique_key="user-7")
    free = failed_job(name="tests.jobs.add", unique_key="user-8")
    Job.objects.create(name="tests.jobs.add", args=[1, 2], unique_key="user-7", active_key="user-7")
    client = staff(superuser=True)
    response = action(client, LIST, "retry", [held, free])
    assert response.status_code == 200
    assert client.messages(response) == [
        "1 job queued again. 1 skipped: its unique key is held by another ready or running job."
    ]
    assert Job.objects.get(pk=held.pk).status == JobStatus.FAILED
    assert Job.objects.get(pk=free.pk).status == JobStatus.READY
    assert Job.objects.get(pk=free.pk).active_key == "user-8"


def test_two_dead_letters_with_the_same_key_retry_one():
    first, second = failed_job(unique_key="k"), failed_job(unique_key="k")
    report = FailedJob.objects.filter(pk__in=[first.pk, second.pk]).retry_all()
    assert (report.retried, report.key_held, report.not_failed) == (1, 1, 0)
    assert Job.objects.filter(status=JobStatus.READY, unique_key="k").count() == 1


def test_delete_action_asks_first_then_deletes_only_dead_letters():
    job = failed_job()
    client = staff(superuser=True)
    confirm = client.post(LIST, {"action": "delete_dead_letters", "_selected_action": [job.pk], "index": 0})
    assert confirm.status_code == 200 and "Delete dead letters?" in text(confirm)
    assert f'<a href="{LIST}" class="button cancel-link">' in text(confirm)  # back to the list
    assert f'<a href="{LIST}">Dead letters</a>' in text(confirm)  # and in the breadcrumbs
    assert Job.objects.filter(pk=job.pk).exists()
    response = action(client, LIST, "delete_dead_letters", [job], post="yes")
    assert client.messages(response) == ["1 dead letter deleted."]
    assert not Job.objects.filter(pk=job.pk).exists()


def test_detail_page_buttons_retry_and_delete():
    retried, deleted = failed_job(), failed_job()
    client = staff(superuser=True)
    page = text(client.get(f"{LIST}{retried.pk}/change/"))
    assert f"{LIST}{retried.pk}/retry/" in page and f"{LIST}{retried.pk}/delete/" in page
    response = client.post(f"{LIST}{retried.pk}/retry/", follow=True)
    assert client.messages(response) == ["1 job queued again."]
    assert Job.objects.get(pk=retried.pk).status == JobStatus.READY
    twice = client.post(f"{LIST}{retried.pk}/retry/", follow=True)  # the button pressed again
    assert client.messages(twice) == [
        "0 jobs queued again. 1 skipped: no longer failed (retried or deleted meanwhile)."
    ]
    assert client.get(f"{LIST}{deleted.pk}/delete/").status_code == 200  # the confirmation
    assert Job.objects.filter(pk=deleted.pk).exists()
    response = client.post(f"{LIST}{deleted.pk}/delete/", {"post": "yes"}, follow=True)
    assert client.messages(response) == ["The job was deleted."]
    assert not Job.objects.filter(pk=deleted.pk).exists()


def test_retry_all_matching_the_filter_in_batches():
    emails = [failed_job(queue="emails") for _ in range(12)]
    others = [failed_job(queue="default") for _ in range(3)]
    client = staff(superuser=True)
    confirm = client.get(f"{LIST}retry-matching/?queue=emails")
    assert confirm.status_code == 200 and "12 dead letters match." in text(confirm)
    assert FailedJob.objects.count() == 15
    response = client.post(f"{LIST}retry-matching/?queue=emails", follow=True)
    assert client.messages(response) == ["12 jobs queued again."]
    assert set(Job.objects.ready().values_list("pk", flat=True)) == {job.pk for job in emails}
    assert set(FailedJob.objects.values_list("pk", flat=True)) == {job.pk for job in others}


def test_batched_retry_and_delete_walk_past_skipped_rows():
    keyed = failed_job(unique_key="held")
    Job.objects.create(name=keyed.name, unique_key="held", active_key="held")
    plain = [failed_job() for _ in range(10)]
    report = FailedJob.objects.all().retry_all(batch_size=3)
    assert (report.retried, report.key_held) == (10, 1)
    assert all(Job.objects.get(pk=job.pk).status == JobStatus.READY for job in plain)
    more = [failed_job() for _ in range(7)]
    deleted, skipped = FailedJob.objects.all().delete_all(batch_size=2)
    assert (deleted, skipped) == (8, 0)  # the 7 new ones and the keyed one
    assert not Job.objects.filter(pk__in=[job.pk for job in more]).exists()


def test_delete_all_matching_the_filter():
    [failed_job(queue="emails") for _ in range(4)]
    kept = failed_job(queue="default")
    client = staff(superuser=True)
    response = client.post(f"{LIST}delete-matching/?queue=emails", follow=True)
    assert client.messages(response) == ["4 dead letters deleted."]
    assert list(FailedJob.objects.values_list("pk", flat=True)) == [kept.pk]


def test_a_retried_job_is_not_deleted_by_a_stale_delete():
    job = failed_job()
    FailedJob.objects.filter(pk=job.pk).retry_all()
    client = staff(superuser=True)
    response = action(client, LIST, "delete_dead_letters", [job], post="yes")
    # The row left the dead letters: nothing is deleted, and the skip is reported.
    assert Job.objects.get(pk=job.pk).status == JobStatus.READY
    assert client.messages(response) == [
        "0 dead letters deleted. 1 skipped: no longer failed (retried or deleted meanwhile)."
    ]
    assert FailedJob.objects.filter(pk=job.pk).delete_all() == (0, 0)
    deleted, skipped = FailedJob.objects.none().delete_all()
    assert (deleted, skipped) == (0, 0)


@pytest.mark.parametrize("status", [JobStatus.READY, JobStatus.RUNNING, JobStatus.SUCCESSFUL])
def test_the_writes_themselves_are_fenced_on_failed(status):
    """Keys read while the jobs were FAILED, written after they moved on: nothing changes."""
    moved = failed_job(unique_key=None)
    Job.objects.filter(pk=moved.pk).update(status=status, worker="w" if status == JobStatus.RUNNING else None)
    before = Job.objects.filter(pk=moved.pk).values().get()
    report = FailedJob.objects.all()._retry_batch([moved.pk])
    assert (report.retried, report.not_failed, report.key_held) == (0, 1, 0)
    # A queryset not narrowed to FAILED: the DELETE's own fence must hold.
    assert Job.objects.filter(pk=moved.pk)._delete_in_batches(JobStatus.FAILED, 10) == (0, 1)
    keyed = failed_job(unique_key="kk")
    Job.objects.filter(pk=keyed.pk).update(status=status)
    assert FailedJob.objects.all()._retry_batch([keyed.pk]).not_failed == 1
    assert Job.objects.filter(pk=moved.pk).values().get() == before
    assert Job.objects.get(pk=keyed.pk).status == status


def test_cancel_writes_are_fenced_on_ready():
    running = Job.objects.create(name="tests.jobs.add", args=[1, 2], status=JobStatus.RUNNING, worker="w")
    ready = [Job.objects.create(name="tests.jobs.add", args=[n, n]) for n in range(5)]
    # The queryset is not narrowed to READY first: the DELETE's own fence must hold.
    selected = Job.objects.filter(pk__in=[running.pk, *[job.pk for job in ready]])
    assert selected.delete_ready(batch_size=2) == 5
    assert list(Job.objects.values_list("pk", flat=True)) == [running.pk]
    assert Job.objects.get(pk=running.pk).cancel_requested_at is None
    # cancel() deletes the ready ones the same way, and asks running ones to stop.
    assert selected.cancel(batch_size=2) == 1
    assert Job.objects.get(pk=running.pk).cancel_requested_at is not None


def test_matching_with_filters_that_do_not_exist_is_an_error_message_not_a_crash():
    failed_job()
    client = staff(superuser=True)
    response = client.post(f"{LIST}retry-matching/?nonsense__field=1", follow=True)
    assert response.status_code == 200
    assert client.messages(response) == ["Those filters are not valid here."]
    assert FailedJob.objects.count() == 1
