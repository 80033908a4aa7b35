"""Queues, overview, workers and schedules in the admin."""

import datetime
import re

import pytest
from django.db.models.functions import Now
from django.test import override_settings
from django.utils import formats, timezone

from django_dbjobs.models import Job, JobStatus, Queue, Schedule, WorkerProcess
from django_dbjobs.operations.queue_stats import finished_per_minute, queue_rows

from .admin_helpers import action, failed_job, schedule_form, staff, text, visible
from .conftest import live_worker

pytestmark = pytest.mark.django_db(transaction=True)


def make_queue_jobs():
    past = timezone.now() - datetime.timedelta(minutes=5)
    Job.objects.create(name="tests.jobs.add", queue="emails", run_at=past)
    Job.objects.create(
        name="tests.jobs.add", queue="emails", run_at=timezone.now() + datetime.timedelta(hours=1)
    )
    Job.objects.create(name="tests.jobs.add", queue="emails", status=JobStatus.RUNNING, worker="w")
    failed_job(queue="emails")
    Job.objects.create(name="tests.jobs.add", queue="default", status=JobStatus.SUCCESSFUL, finished_at=Now())


def test_queue_rows_count_each_state_and_the_lag():
    make_queue_jobs()
    Queue.objects.pause(["idle"], by="ops")
    rows = {row.name: row for row in queue_rows()}
    emails = rows["emails"]
    assert (emails.due, emails.later, emails.running, emails.failed) == (1, 1, 1, 1)
    assert 280 < emails.lag < 400
    assert not emails.paused
    assert rows["idle"].paused and rows["idle"].paused_by == "ops"
    assert "default" not in rows, "only successes: nothing to show"


def test_finished_per_minute_buckets_the_last_hour():
    now = timezone.now()
    for minutes_ago, status in [(5, JobStatus.SUCCESSFUL), (5, JobStatus.FAILED), (10, JobStatus.SUCCESSFUL)]:
        Job.objects.create(
            name="tests.jobs.add", status=status, finished_at=now - datetime.timedelta(minutes=minutes_ago)
        )
    Job.objects.create(
        name="tests.jobs.add", status=JobStatus.SUCCESSFUL, finished_at=now - datetime.timedelta(hours=2)
    )
    minutes = finished_per_minute(60)
    assert len(minutes) == 60
    assert sum(m.succeeded for m in minutes) == 2 and sum(m.failed for m in minutes) == 1
    five_ago = (now - datetime.timedelta(minutes=5)).replace(second=0, microsecond=0)
    (bucket,) = [minute for minute in minutes if minute.at == five_ago]
    assert (bucket.succeeded, bucket.failed) == (1, 1)
    assert minutes[0].at < minutes[-1].at


def test_queues_page_lists_counts_and_pauses_and_resumes():
    make_queue_jobs()
    client = staff(superuser=True)
    page = text(client.get("/admin/django_dbjobs/queue/"))
    row = re.search(r'<tr data-queue="emails">(.*?)</tr>', page).group(1)
    assert re.findall(r'class="number">(?:<a [^>]*>)?(\d+)', row)[:4] == ["1", "1", "1", "1"]
    assert "5 min" in row  # the oldest due job's wait
    assert "No worker serves this queue" in row and ">Pause<" in row  # a due job, no live worker
    live_worker("h:1:a")  # serves every queue
    row = re.search(
        r'<tr data-queue="emails">(.*?)</tr>', text(client.get("/admin/django_dbjobs/queue/"))
    ).group(1)
    assert "Active" in row and ">Pause<" in row
    response = client.post("/admin/django_dbjobs/queue/pause/", {"queue": "emails"}, follow=True)
    assert client.messages(response) == [
        "Queue emails paused: workers stop claiming from it within a second or two."
    ]
    row = re.search(r'<tr data-queue="emails">(.*?)</tr>', text(response)).group(1)
    assert "Paused" in row and ">Resume<" in row
    again = client.post("/admin/django_dbjobs/queue/pause/", {"queue": "emails"}, follow=True)
    assert client.messages(again) == ["Queue emails was already paused."]
    resumed = client.post("/admin/django_dbjobs/queue/resume/", {"queue": "emails"}, follow=True)
    assert client.messages(resumed) == ["Queue emails resumed."]
    assert not Queue.objects.paused().exists()
    bad = client.post("/admin/django_dbjobs/queue/pause/", {"queue": "bad name"}, follow=True)
    assert "queue must be 1 to 100 letters" in client.messages(bad)[0]
    for evil in ("https://evil.example/", "//evil.example/", "/\\evil.example/"):
        offsite = client.post("/admin/django_dbjobs/queue/pause/", {"queue": "x", "next": evil})
        assert offsite["Location"] == "/admin/django_dbjobs/queue/", evil
    inside = client.post(
        "/admin/django_dbjobs/queue/pause/", {"queue": "y", "next": "/admin/django_dbjobs/overview/"}
    )
    assert inside["Location"] == "/admin/django_dbjobs/overview/"


def test_a_paused_queue_shows_who_paused_it_and_when_to_the_second_not_only_on_hover():
    make_queue_jobs()
    Queue.objects.pause(["emails"], by="ops-anna")
    Queue.objects.pause(["default"])  # in code, by nobody
    paused_at = timezone.localtime(Queue.objects.get(name="emails").paused_at)
    client = staff(superuser=True)
    for url in ("/admin/django_dbjobs/queue/", "/admin/django_dbjobs/overview/"):
        page = text(client.get(url))
        row = re.search(r'<tr data-queue="emails">(.*?)</tr>', page).group(1)
        when = formats.date_format(paused_at, "N j, Y, g:i:s a")
        assert f"Paused by ops-anna at {when}" in visible(row), url
        row = re.search(r'<tr data-queue="default">(.*?)</tr>', page).group(1)
        assert re.search(r"Paused at \w+\. \d+, \d{4}, \d+:\d\d:\d\d [ap]\.m\.", visible(row)), url


@override_settings(DBJOBS_HEARTBEAT_TIMEOUT=600)  # "live" must not depend on how fast this test runs
def test_overview_shows_the_chart_and_the_queues():
    make_queue_jobs()
    WorkerProcess.objects.create(id="h:1:a", hostname="h", pid=1, concurrency=4)
    client = staff(superuser=True)
    response = client.get("/admin/django_dbjobs/overview/")
    page = text(response)
    assert response.status_code == 200
    assert page.count("<rect ") == 120  # two stacked bars per minute
    assert "1 succeeded" in page and "1 failed" in page
    assert "1 live worker" in page and "4 threads" in page
    assert '<tr data-queue="emails">' in page
    assert "<script" not in page.split("<svg", 1)[1].split("</svg>", 1)[0]
    index = text(client.get("/admin/django_dbjobs/"))
    assert "/admin/django_dbjobs/overview/" in index and "Dead letters" in index


def test_workers_page_shows_heartbeats_and_running_jobs():
    worker = WorkerProcess.objects.create(
        id="host-a:42:beef", hostname="host-a", pid=42, concurrency=3, queues=["emails"]
    )
    dead = WorkerProcess.objects.create(id="host-b:7:dead", hostname="host-b", pid=7, concurrency=1)
    WorkerProcess.objects.filter(pk=dead.pk).update(
        heartbeat_at=timezone.now() - datetime.timedelta(minutes=10)
    )
    job = Job.objects.create(name="tests.jobs.add", status=JobStatus.RUNNING, worker=worker.pk)
    client = staff(superuser=True)
    page = text(client.get("/admin/django_dbjobs/workerprocess/"))
    assert "host-a" in page and "emails" in page and "presumed dead" in page
    assert "?status=RUNNING&amp;worker=host-a%3A42%3Abeef" in page
    detail = text(client.get(f"/admin/django_dbjobs/workerprocess/{worker.pk}/change/"))
    assert job.pk in detail and "tests.jobs.add" in detail
    running = text(client.get("/admin/django_dbjobs/job/", {"status": "RUNNING", "worker": worker.pk}))
    assert job.pk[-12:] in running


def test_a_workers_last_heartbeat_is_shown_to_the_second():
    worker = WorkerProcess.objects.create(id="host-a:42:beef", hostname="host-a", pid=42, concurrency=3)
    WorkerProcess.objects.filter(pk=worker.pk).update(
        heartbeat_at=timezone.now() - datetime.timedelta(seconds=125)
    )
    page = visible(staff(superuser=True).get("/admin/django_dbjobs/workerprocess/").content.decode())
    assert re.search(r"\b2 min [5-9] s ago", page), page  # was "2 min ago"


def test_the_schedule_list_shows_the_state_in_its_own_column_not_in_the_names_link():
    Schedule.objects.create(name="nightly", cron="30 2 * * *", job="tests.jobs.scheduled")
    Schedule.objects.create(name="hourly", cron="0 * * * *", job="tests.jobs.scheduled", enabled=False)
    page = text(staff(superuser=True).get("/admin/django_dbjobs/schedule/"))
    names = re.findall(r'<th class="field-name"><a href="[^"]+">(.*?)</a></th>', page)
    assert sorted(names) == ["hourly", "nightly"], "each link is the name alone"
    assert '<td class="field-state_display">enabled</td>' in page
    assert '<td class="field-state_display">disabled</td>' in page


def test_schedule_list_shows_next_runs_and_the_last_outcome():
    last = Job.objects.create(name="tests.jobs.scheduled", status=JobStatus.FAILED, finished_at=Now())
    schedule = Schedule.objects.create(
        name="nightly", cron="30 2 * * *", timezone="Europe/Paris", job="tests.jobs.scheduled"
    )
    Schedule.objects.filter(pk=schedule.pk).update(last_job_id=last.pk, last_due_at=timezone.now())
    page = text(staff(superuser=True).get("/admin/django_dbjobs/schedule/"))
    assert "02:30:00 Europe/Paris" in page
    assert "Failed" in page and f"/admin/django_dbjobs/job/{last.pk}/change/" in page


def test_schedule_actions_enable_disable_and_run_now():
    schedule = Schedule.objects.create(name="s", cron="0 3 * * *", job="tests.jobs.scheduled")
    client = staff(superuser=True)
    url = "/admin/django_dbjobs/schedule/"
    response = action(client, url, "disable_schedules", [schedule])
    assert client.messages(response) == ["1 schedule disabled."]
    assert not Schedule.objects.get(pk=schedule.pk).enabled
    response = action(client, url, "enable_schedules", [schedule])
    assert client.messages(response) == ["1 schedule enabled."]
    schedule.refresh_from_db()
    assert schedule.enabled and schedule.next_due_at is not None
    response = client.post(f"{url}{schedule.pk}/run-now/", follow=True)
    job = Job.objects.get(name="tests.jobs.scheduled")
    assert client.messages(response) == [f"Schedule s enqueued job {job.pk}."]
    assert Schedule.objects.get(pk=schedule.pk).last_manual_job_id == job.pk
    response = action(client, url, "run_now", [schedule])
    assert Job.objects.count() == 2


def test_run_now_with_no_overlap_reports_the_active_job():
    schedule = Schedule.objects.create(
        name="s", cron="0 3 * * *", job="tests.jobs.scheduled", no_overlap=True
    )
    first, _created = schedule.run_now()
    client = staff(superuser=True)
    response = client.post(f"/admin/django_dbjobs/schedule/{schedule.pk}/run-now/", follow=True)
    assert client.messages(response) == [
        f"Schedule s was not run: its previous job {first.pk} is still active (no overlap)."
    ]
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("cron", "61 * * * *", "cron"),
        ("timezone", "Mars/Olympus", "timezone"),
        ("job", "tests.jobs.nope", "not a registered job"),
        ("args", "[1, 2, 3]", "arguments"),
    ],
)
def test_the_schedule_form_validates_with_clear_messages(field, value, message):
    client = staff(superuser=True)
    response = client.post("/admin/django_dbjobs/schedule/add/", schedule_form(**{field: value}))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors, errors
    assert message.lower() in " ".join(errors[field]).lower()
    assert not Schedule.objects.exists()


def test_a_valid_schedule_is_added_with_its_next_due_time():
    client = staff(superuser=True)
    response = client.post("/admin/django_dbjobs/schedule/add/", schedule_form())
    assert response.status_code == 302
    schedule = Schedule.objects.get(name="hourly")
    assert schedule.next_due_at is not None and schedule.next_due_at.minute == 0


def test_a_schedule_from_settings_is_read_only_but_can_be_disabled():
    schedule = Schedule.objects.create(
        name="from-settings", cron="0 3 * * *", job="tests.jobs.scheduled", defined_in="settings"
    )
    client = staff(superuser=True)
    page = text(client.get(f"/admin/django_dbjobs/schedule/{schedule.pk}/change/"))
    assert "Defined in DBJOBS_SCHEDULES" in page
    assert 'name="cron"' not in page and 'name="enabled"' in page
    assert client.get(f"/admin/django_dbjobs/schedule/{schedule.pk}/delete/").status_code == 403
    response = client.post(f"/admin/django_dbjobs/schedule/{schedule.pk}/change/", {"cron": "* * * * *"})
    assert response.status_code == 302
    schedule.refresh_from_db()
    assert schedule.cron == "0 3 * * *" and not schedule.enabled


def test_a_schedule_from_settings_shows_its_arguments_masked():
    schedule = Schedule.objects.create(
        name="billing",
        cron="0 3 * * *",
        job="tests.jobs.charge",
        args=["tok_live_999", 5],
        kwargs={"note": "visible", "api_key": "k-123"},
        defined_in="settings",
    )
    page = staff(superuser=True).get(f"/admin/django_dbjobs/schedule/{schedule.pk}/change/").content.decode()
    assert "tok_live_999" not in page and "k-123" not in page
    assert "visible" in page and "********" in page


def test_deleting_schedules_keeps_those_the_settings_define():
    own = Schedule.objects.create(name="own", cron="0 3 * * *", job="tests.jobs.scheduled")
    defined = Schedule.objects.create(
        name="set", cron="0 3 * * *", job="tests.jobs.scheduled", defined_in="settings"
    )
    retired = Schedule.objects.create(
        name="gone",
        cron="0 3 * * *",
        job="tests.jobs.scheduled",
        defined_in="settings",
        removed_at=timezone.now(),
    )
    client = staff(superuser=True)
    page = text(client.get("/admin/django_dbjobs/schedule/"))
    assert 'value="delete_selected"' not in page and 'value="delete_schedules"' in page
    response = action(
        client, "/admin/django_dbjobs/schedule/", "delete_schedules", [own, defined, retired], post="yes"
    )
    assert client.messages(response) == ["2 schedules deleted. 1 kept: DBJOBS_SCHEDULES defines it."]
    assert list(Schedule.objects.values_list("name", flat=True)) == ["set"]
