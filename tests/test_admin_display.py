"""What every admin page shows: one date format, the timeline in order, whole ids, narrow lists."""

import datetime
import html
import re
import zoneinfo

import pytest
from django.utils import formats, timezone, translation

from django_dbjobs.models import Job, JobStatus, Schedule, WorkerProcess

from .admin_helpers import failed_job, staff, text

pytestmark = pytest.mark.django_db(transaction=True)

TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")
#: <time datetime="…" title="…">shown</time>, as the admin's one date helper writes it.
TIME = re.compile(r'<time datetime="([^"]+)" title="([^"]+)">(.*?)</time>')
#: The old list and timeline format: "2026-12-03 08:04:17", shown as text.
OLD_FORMAT = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\b")


def visible_text(page: str) -> str:
    """The page's text without tags (and so without titles and other attributes)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)))


def pages_with_dates() -> list[str]:
    """A job, a dead letter, a schedule that ran (on time and by hand), a worker running a job."""
    failed = failed_job()
    worker = WorkerProcess.objects.create(id="host-a:42:beef", hostname="host-a", pid=42, concurrency=2)
    running = Job.objects.create(
        name="tests.jobs.add", status=JobStatus.RUNNING, worker=worker.pk, last_attempted_at=timezone.now()
    )
    schedule = Schedule.objects.create(
        name="nightly", cron="30 2 * * *", timezone="Europe/Paris", job="tests.jobs.scheduled"
    )
    schedule.run_now()
    Schedule.objects.filter(pk=schedule.pk).update(
        last_job_id=failed.pk, last_due_at=timezone.now(), last_fired_at=timezone.now()
    )
    return [
        "/admin/django_dbjobs/job/",
        f"/admin/django_dbjobs/job/{failed.pk}/change/",
        f"/admin/django_dbjobs/job/{running.pk}/change/",
        "/admin/django_dbjobs/failedjob/",
        f"/admin/django_dbjobs/failedjob/{failed.pk}/change/",
        "/admin/django_dbjobs/schedule/",
        f"/admin/django_dbjobs/schedule/{schedule.pk}/change/",
        "/admin/django_dbjobs/workerprocess/",
        f"/admin/django_dbjobs/workerprocess/{worker.pk}/change/",
    ]


@pytest.mark.parametrize(
    "language, to_the_second",
    # The language's DATETIME_FORMAT ('N j, Y, P', 'j. F Y H:i') with the seconds after the minutes.
    [("en", "N j, Y, g:i:s a"), ("de", "j. F Y H:i:s")],
)
def test_every_date_is_djangos_datetime_format_to_the_second_in_the_active_timezone_with_utc_on_hover(
    language, to_the_second
):
    urls = pages_with_dates()
    client = staff(superuser=True)
    with timezone.override(TOKYO), translation.override(language):
        for url in urls:
            page = client.get(url).content.decode()
            times = TIME.findall(page)
            assert times, f"{url}: no date shown with the admin's date helper"
            for iso, title, shown in times:
                moment = datetime.datetime.fromisoformat(iso)
                expected = formats.date_format(moment.astimezone(TOKYO), to_the_second)
                assert html.unescape(re.sub(r"<[^>]+>", "", shown)) == expected, url
                assert title.startswith(moment.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")), (
                    url
                )
            assert not OLD_FORMAT.search(visible_text(page)), f"{url}: a date in another format"


def test_the_schedule_page_shows_the_next_run_once_with_its_own_timezone_on_hover():
    schedule = Schedule.objects.create(
        name="nightly", cron="30 2 * * *", timezone="Europe/Paris", job="tests.jobs.scheduled"
    )
    client = staff(superuser=True)
    for url in ("/admin/django_dbjobs/schedule/", f"/admin/django_dbjobs/schedule/{schedule.pk}/change/"):
        page = client.get(url).content.decode()
        next_runs = [
            found
            for found in TIME.findall(page)
            if found[0].startswith(schedule.next_due_at.date().isoformat())
        ]
        assert len(next_runs) == 1, f"{url}: the next run shown {len(next_runs)} times"
        assert "02:30:00 Europe/Paris" in next_runs[0][1]
        assert "next due at" not in visible_text(page).lower()


def test_the_timeline_is_in_time_order():
    # A retried job: due again (08:04:17) after it first started (08:04:14), as in the issue.
    enqueued = datetime.datetime(2026, 12, 3, 8, 4, 10, tzinfo=datetime.UTC)
    at = {
        name: enqueued + datetime.timedelta(seconds=offset)
        for name, offset in {"started": 4, "failed": 5, "due": 7, "last": 7.5, "finished": 8}.items()
    }
    error = {"attempt": 1, "at": at["failed"].isoformat(), "worker": "w:1:a", "summary": "RuntimeError: boom"}
    job = failed_job(
        enqueued_at=enqueued,
        started_at=at["started"],
        run_at=at["due"],
        last_attempted_at=at["last"],
        finished_at=at["finished"],
        errors=[error, {**error, "attempt": 2, "at": at["finished"].isoformat()}],
        attempts=2,
    )
    Job.objects.filter(pk=job.pk).update(enqueued_at=enqueued)  # the database's clock set it
    page = text(staff(superuser=True).get(f"/admin/django_dbjobs/job/{job.pk}/change/"))
    timeline = page.split("field-timeline")[1].split("</table>")[0]
    events = re.findall(r"<tr><td>([^<]+)</td>", timeline)
    assert events == [
        "Enqueued",
        "First started",
        "Attempt 1 failed",
        "Due",
        "Last attempt started",
        "Attempt 2 failed",
        "Finished: Failed",
    ]
    moments = [datetime.datetime.fromisoformat(iso) for iso, _title, _shown in TIME.findall(timeline)]
    assert moments == sorted(moments)
    assert "+4.0 s" in timeline and "+7.0 s" in timeline, "how long after the enqueue each event came"


def test_lists_show_whole_ids_in_monospace_and_one_when_column():
    ready = Job.objects.create(name="tests.jobs.add", args=[1, 2])
    dead = failed_job()
    client = staff(superuser=True)
    for url, listed in (
        ("/admin/django_dbjobs/job/", {ready, dead}),
        ("/admin/django_dbjobs/failedjob/", {dead}),
    ):
        page = client.get(url).content.decode()
        ids = re.findall(r'<code class="dbjobs-id">(.*?)</code>', page)
        assert {re.sub(r"<[^>]+>", "", found) for found in ids} == {job.pk for job in listed}, url
        headers = re.findall(r'<th scope="col" class="([^"]*column-[^"]*)"', page)
        assert len(headers) <= 5, f"{url}: {len(headers)} columns besides the checkbox: {headers}"
    jobs = client.get("/admin/django_dbjobs/job/").content.decode()
    assert "column-when" in jobs
    for old in ("column-enqueued_at", "column-run_at", "column-finished_at", "column-priority"):
        assert old not in jobs
    detail = client.get(f"/admin/django_dbjobs/job/{ready.pk}/change/").content.decode()
    assert f'<code class="dbjobs-id">{ready.pk}</code>' in detail
    assert f'data-copy="{ready.pk}"' in detail, "a Copy button with the whole id"


def test_the_when_column_shows_the_moment_of_the_status_and_every_moment_on_hover():
    due = timezone.now() + datetime.timedelta(hours=2)
    Job.objects.create(name="tests.jobs.add", args=[1, 2], run_at=due)
    page = staff(superuser=True).get("/admin/django_dbjobs/job/").content.decode()
    cell = re.search(r'<td class="field-when">(.*?)</td>', page, flags=re.S).group(1)
    # To the second; the date and the time each kept on one line: two lines in a narrow column.
    local = timezone.localtime(due)
    date, time = formats.date_format(local, "N j, Y,"), formats.date_format(local, "g:i:s a")
    assert f"<span>{date}</span> <span>{time}</span></time>" in html.unescape(cell)
    assert ">due<" in cell
    title = html.unescape(re.search(r'title="([^"]+)"', cell).group(1)).splitlines()
    utc = due.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert title[0] == utc and f"Due: {utc}" in title[1:]
    assert [line.split(":")[0] for line in title[1:]] == ["Enqueued", "Due"], "no attempt, not finished"


def test_the_schedule_form_offers_the_registered_jobs():
    client = staff(superuser=True)
    page = client.get("/admin/django_dbjobs/schedule/add/").content.decode()
    select = re.search(r'<select name="job".*?</select>', page, flags=re.S)
    assert select, "the job is a choice, not free text"
    assert '<option value="tests.jobs.scheduled">tests.jobs.scheduled</option>' in select.group(0)
    # A schedule whose job this process does not know keeps it, marked.
    schedule = Schedule.objects.create(name="old", cron="0 3 * * *", job="tests.jobs.scheduled")
    Schedule.objects.filter(pk=schedule.pk).update(job="gone.jobs.removed")
    page = client.get(f"/admin/django_dbjobs/schedule/{schedule.pk}/change/").content.decode()
    marked = "gone.jobs.removed (not registered in this process)"
    assert f'<option value="gone.jobs.removed" selected>{marked}</option>' in page


def test_only_deleting_asks_with_a_red_button():
    failed_job()
    client = staff(superuser=True)
    retry = client.get("/admin/django_dbjobs/failedjob/retry-matching/").content.decode()
    delete = client.get("/admin/django_dbjobs/failedjob/delete-matching/").content.decode()
    assert "Yes, retry them" in retry and "delete-confirmation" not in retry
    assert "Yes, delete them" in delete and "delete-confirmation" in delete


def test_run_now_keeps_the_schedules_name_as_written():
    schedule = Schedule.objects.create(name="nightly-summary", cron="0 3 * * *", job="tests.jobs.scheduled")
    client = staff(superuser=True)
    response = client.post(f"/admin/django_dbjobs/schedule/{schedule.pk}/run-now/", follow=True)
    shown = re.findall(r'<ul class="messagelist">(.*?)</ul>', response.content.decode(), flags=re.S)[0]
    assert "nightly-summary enqueued job" in shown
    assert "Nightly-summary" not in shown, "the admin capitalises a message's first letter"


def test_a_worker_id_wraps_only_after_its_colons_and_is_escaped():
    from django_dbjobs.admin.display import worker_id

    assert worker_id("web-2:3310:1be07d54") == (
        '<span class="dbjobs-id">web-2:<wbr>3310:<wbr>1be07d54</span>'
    )
    assert worker_id("<b>:1") == '<span class="dbjobs-id">&lt;b&gt;:<wbr>1</span>'
    assert worker_id("") == ""
