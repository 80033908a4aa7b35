"""Admin security: staff only, model permissions, POST-only state changes with CSRF checks."""

import pytest
from django.test import Client

from django_dbjobs.models import Job, JobStatus, Queue, Schedule

from .admin_helpers import StaffClient, action, failed_job, staff

pytestmark = pytest.mark.django_db(transaction=True)

DEAD = "/admin/django_dbjobs/failedjob/"
PAGES = [
    "/admin/django_dbjobs/job/",
    "/admin/django_dbjobs/failedjob/",
    "/admin/django_dbjobs/schedule/",
    "/admin/django_dbjobs/workerprocess/",
    "/admin/django_dbjobs/queue/",
    "/admin/django_dbjobs/overview/",
]


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_and_non_staff_users_are_sent_to_the_login(url):
    from django.contrib.auth.models import User

    assert Client().get(url).status_code == 302
    user = User.objects.create_user("plain", password="x", is_staff=False)
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.parametrize("url", PAGES)
def test_staff_without_permissions_get_403(url):
    assert staff("nobody").get(url).status_code == 403


def test_view_permission_shows_dead_letters_but_cannot_retry_or_delete():
    job = failed_job()
    client = staff("viewer", "django_dbjobs.view_failedjob")
    page = client.get(DEAD)
    assert page.status_code == 200
    assert b"Retry all matching" not in page.content and b"Delete all matching" not in page.content
    assert b'value="retry"' not in page.content and b'value="delete_dead_letters"' not in page.content
    assert client.post(f"{DEAD}{job.pk}/retry/").status_code == 403
    assert client.post(f"{DEAD}retry-matching/").status_code == 403
    assert client.post(f"{DEAD}delete-matching/").status_code == 403
    assert client.post(f"{DEAD}{job.pk}/delete/", {"post": "yes"}).status_code == 403
    action(client, DEAD, "retry", [job])
    action(client, DEAD, "delete_dead_letters", [job], post="yes")
    assert Job.objects.get(pk=job.pk).status == JobStatus.FAILED


def test_change_permission_retries_but_cannot_delete():
    job = failed_job()
    client = staff("retrier", "django_dbjobs.view_failedjob", "django_dbjobs.change_failedjob")
    assert b'value="delete_dead_letters"' not in client.get(DEAD).content
    assert client.post(f"{DEAD}{job.pk}/delete/", {"post": "yes"}).status_code == 403
    response = client.post(f"{DEAD}{job.pk}/retry/", follow=True)
    assert client.messages(response) == ["1 job queued again."]
    assert Job.objects.get(pk=job.pk).status == JobStatus.READY


def test_delete_permission_deletes_but_cannot_retry():
    job = failed_job()
    client = staff("deleter", "django_dbjobs.view_failedjob", "django_dbjobs.delete_failedjob")
    assert client.post(f"{DEAD}{job.pk}/retry/").status_code == 403
    response = action(client, DEAD, "delete_dead_letters", [job], post="yes")
    assert client.messages(response) == ["1 dead letter deleted."]


def test_pausing_needs_the_change_permission_on_queues():
    viewer = staff("qviewer", "django_dbjobs.view_queue")
    assert viewer.get("/admin/django_dbjobs/queue/").status_code == 200
    assert b">Pause<" not in viewer.get("/admin/django_dbjobs/queue/").content
    assert viewer.post("/admin/django_dbjobs/queue/pause/", {"queue": "default"}).status_code == 403
    assert not Queue.objects.paused().exists()
    changer = staff("qchanger", "django_dbjobs.view_queue", "django_dbjobs.change_queue")
    changer.post("/admin/django_dbjobs/queue/pause/", {"queue": "default"})
    assert list(Queue.objects.paused().values_list("name", "paused_by")) == [("default", "qchanger")]


def test_enabling_a_schedule_needs_the_change_permission():
    schedule = Schedule.objects.create(name="s", cron="0 3 * * *", job="tests.jobs.scheduled", enabled=False)
    viewer = staff("sviewer", "django_dbjobs.view_schedule")
    response = viewer.post(
        "/admin/django_dbjobs/schedule/",
        {"action": "enable_schedules", "_selected_action": [schedule.pk], "index": 0},
    )
    assert response.status_code == 200  # the list again: a viewer's page has no such action
    assert b'value="enable_schedules"' not in response.content
    assert not Schedule.objects.get(pk=schedule.pk).enabled
    assert viewer.post(f"/admin/django_dbjobs/schedule/{schedule.pk}/run-now/").status_code == 403
    assert not Job.objects.exists()


def test_overview_needs_the_view_permission_on_jobs():
    assert (
        staff("o1", "django_dbjobs.view_failedjob").get("/admin/django_dbjobs/overview/").status_code == 403
    )
    assert staff("o2", "django_dbjobs.view_job").get("/admin/django_dbjobs/overview/").status_code == 200


@pytest.mark.parametrize(
    "path",
    ["failedjob/{pk}/retry/", "queue/pause/", "queue/resume/", "schedule/{schedule}/run-now/"],
)
def test_state_changes_refuse_get(path):
    job = failed_job()
    schedule = Schedule.objects.create(name="s", cron="0 3 * * *", job="tests.jobs.scheduled")
    client = staff(superuser=True)
    response = client.get("/admin/django_dbjobs/" + path.format(pk=job.pk, schedule=schedule.pk))
    assert response.status_code == 405
    assert Job.objects.get(pk=job.pk).status == JobStatus.FAILED
    assert not Queue.objects.exists()
    assert Job.objects.count() == 1


def test_matching_views_only_change_on_post():
    job = failed_job()
    client = staff(superuser=True)
    assert client.get(f"{DEAD}retry-matching/").status_code == 200
    assert client.get(f"{DEAD}delete-matching/").status_code == 200
    assert Job.objects.get(pk=job.pk).status == JobStatus.FAILED


@pytest.mark.parametrize(
    "path,data",
    [
        ("failedjob/{pk}/retry/", {}),
        ("failedjob/retry-matching/", {}),
        ("failedjob/delete-matching/", {}),
        ("failedjob/{pk}/delete/", {"post": "yes"}),
        ("failedjob/", {"action": "retry", "_selected_action": "{pk}", "index": "0"}),
        (
            "failedjob/",
            {"action": "delete_dead_letters", "_selected_action": "{pk}", "index": "0", "post": "yes"},
        ),
        ("queue/pause/", {"queue": "default"}),
    ],
)
def test_posts_without_a_csrf_token_are_refused(path, data):
    job = failed_job()
    client = staff(superuser=True)
    assert isinstance(client, StaffClient)
    data = {key: value.format(pk=job.pk) for key, value in data.items()}
    response = client.post("/admin/django_dbjobs/" + path.format(pk=job.pk), data, csrf=False)
    assert response.status_code == 403
    assert Job.objects.get(pk=job.pk).status == JobStatus.FAILED
    assert not Queue.objects.paused().exists()
