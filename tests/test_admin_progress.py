"""The admin's progress: the list's column, the job page's block and checkpoint, the JSON view, batches."""

from __future__ import annotations

import datetime
import json
import re
import signal

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from django_dbjobs import batch, enqueue
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.models.progress import Progress

from . import jobs, long_jobs
from .admin_helpers import failed_job, staff, visible
from .conftest import wait_for

pytestmark = pytest.mark.django_db

JOBS = "/admin/django_dbjobs/job/"
PROGRESS = f"{JOBS}progress/"
BATCHES = "/admin/django_dbjobs/batch/"


def reported(done, total=None, note="", rate=None, seconds_ago=2.0) -> dict:
    """A progress record as the worker stores it."""
    at = timezone.now() - datetime.timedelta(seconds=seconds_ago)
    since = at - datetime.timedelta(seconds=30)
    return Progress(done, total, note, rate, at, since).as_record()


def job_with(
    status=JobStatus.RUNNING, progress=None, checkpoint=None, name="tests.jobs.record", **fields
) -> Job:
    job = enqueue(jobs.record, "a") if name == "tests.jobs.record" else enqueue(name, *fields.pop("args", []))
    running = {"worker": "host:1:abcd", "attempts": 1, "last_attempted_at": timezone.now()}
    finished = {"finished_at": timezone.now()} if status in (JobStatus.SUCCESSFUL, JobStatus.FAILED) else {}
    Job.objects.filter(pk=job.pk).update(
        status=status,
        progress_state=progress,
        checkpoint_state=checkpoint,
        **(running if status != JobStatus.READY else {}),
        **finished,
        **fields,
    )
    return Job.objects.get(pk=job.pk)


def field(page: str, name: str) -> str:
    """The HTML of the job page's field `name` ('' if the page has none)."""
    match = re.search(rf'field-{name}".*?(?=<div class="form-row|</fieldset>)', page, re.S)
    return match.group(0) if match else ""


def poll(client: Client, *ids: str, parts=("block",)):
    query = "&".join([*(f"id={pk}" for pk in ids), *(f"part={part}" for part in parts)])
    return client.get(f"{PROGRESS}?{query}")


def test_the_list_shows_a_running_jobs_bar_percent_and_note_in_its_status_column_and_refreshes_it():
    running = job_with(progress=reported(40, 100, "importing users from the old CRM, batch 7 of 12 now"))
    counting = job_with(progress=reported(1234, note="rows"))
    failed = job_with(JobStatus.FAILED, progress=reported(60, 100, "gave up"), errors=[])
    succeeded = job_with(JobStatus.SUCCESSFUL, progress=reported(100, 100, "finished"))
    never = job_with(JobStatus.READY)
    page = staff(superuser=True).get(JOBS).content.decode()
    rows = _rows(page)
    cell = _status_cell(rows[running.pk])
    assert re.search(
        r'<progress class="dbjobs-bar" max="100" value="40.0" aria-label="40 of 100 \(40%\)">', cell
    )
    assert "Running" in visible(cell) and "attempt 1/" in visible(cell), "the status as before, then the bar"
    assert "40%" in visible(cell) and "importing users from the old CRM, batch…" in visible(cell)
    assert 'title="importing users from the old CRM, batch 7 of 12 now"' in cell, "the whole note on hover"
    assert f'data-dbjobs-job="{running.pk}" data-dbjobs-part="status_line"' in cell
    assert f'data-dbjobs-url="{PROGRESS}"' in cell and "data-dbjobs-running" in cell
    assert "1,234 done" in visible(rows[counting.pk]) and "<progress" in rows[counting.pk], "moving: no total"
    # A failed job shows its last report, muted, and nothing refreshes it; a succeeded job, none.
    assert "dbjobs-finished" in rows[failed.pk] and "dbjobs-muted" in rows[failed.pk]
    assert "60%" in visible(rows[failed.pk]) and "data-dbjobs-running" not in rows[failed.pk]
    assert "<progress" not in rows[succeeded.pk] and "data-dbjobs-job" not in rows[succeeded.pk]
    assert "<progress" not in rows[never.pk] and "data-dbjobs-running" not in rows[never.pk]
    headers = re.findall(r'<th scope="col" class="([^"]*column-[^"]*)"', page)
    assert len(headers) == 5, "no column more: the list fits 1280 px"
    assert re.search(r'<script src="[^"]*django_dbjobs/progress\.js">', page)
    assert not re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page), "no inline script (a strict CSP)"


def _status_cell(row: str) -> str:
    return re.search(r'<td class="field-status_and_attempts">.*?</td>', row, re.S).group(0)


def _rows(page: str) -> dict[str, str]:
    """Each row of the list by its job's id."""
    rows = re.findall(r"<tr>(.*?)</tr>", page, flags=re.S)
    found = {}
    for row in rows:
        match = re.search(r'name="_selected_action" value="([^"]+)"', row)
        if match:
            found[match.group(1)] = row
    return found


def test_the_list_reads_no_row_of_progress_apart():
    client = staff(superuser=True)
    job_with(progress=reported(1, 10))
    client.get(JOBS)
    with CaptureQueriesContext(connection) as one:
        client.get(JOBS)
    for n in range(5):
        job_with(progress=reported(n, 10, f"note {n}"))
    with CaptureQueriesContext(connection) as six:
        client.get(JOBS)
    assert len(six) == len(one)


def test_the_job_page_shows_the_bar_numbers_note_rate_time_left_and_last_report():
    job = job_with(progress=reported(40, 100, "users", rate=2.0, seconds_ago=3))
    page = staff(superuser=True).get(f"{JOBS}{job.pk}/change/").content.decode()
    block = re.search(
        r'<div class="dbjobs-live" data-dbjobs-job="[^"]+" data-dbjobs-part="block".*?</div>', page, re.S
    )
    assert block, "the progress block refreshes while the job runs"
    shown = visible(page)
    assert "40 of 100 (40%)" in shown and "users" in shown
    assert "2 per second" in shown and "about 30 s left" in shown
    assert re.search(r"reported at .* \(3\.\d s ago\)", shown), shown
    assert '<progress class="dbjobs-bar" max="100" value="40.0"' in page
    assert 'data-dbjobs-part="status"' in page, "the status too: it says when the job finished"


@pytest.mark.parametrize(
    ("rate", "expected"),
    [(0.5, "30 per minute"), (0.002, "7.2 per hour"), (12.345, "12.3 per second")],
)
def test_the_pace_reads_in_the_unit_that_suits_it(rate, expected):
    job = job_with(progress=reported(10, 1000, rate=rate))
    assert expected in visible(staff(superuser=True).get(f"{JOBS}{job.pk}/change/").content.decode())


def test_a_finished_jobs_page_shows_its_last_report_muted_and_no_time_left():
    job = job_with(JobStatus.FAILED, progress=reported(7, 10, "half way", rate=1.0), errors=[])
    page = staff(superuser=True).get(f"{JOBS}{job.pk}/change/").content.decode()
    shown = visible(page)
    assert "7 of 10 (70%)" in shown and "its last report before it finished" in shown
    assert "left" not in shown.split("half way")[1].split("Timeline")[0]
    assert "dbjobs-muted" in page and "data-dbjobs-running" not in page
    uncounted = job_with(JobStatus.FAILED, progress=reported(1234, note="rows"), errors=[])
    block = field(
        staff("other", superuser=True).get(f"{JOBS}{uncounted.pk}/change/").content.decode(),
        "progress_display",
    )
    assert "1,234 done" in visible(block) and "<progress" not in block, "no bar moving forever"


def test_a_job_without_progress_or_checkpoint_has_no_progress_fieldset_unless_it_runs():
    client = staff(superuser=True)
    quiet = job_with(JobStatus.SUCCESSFUL)
    page = client.get(f"{JOBS}{quiet.pk}/change/").content.decode()
    assert "field-progress_display" not in page and "field-checkpoint_display" not in page
    started = job_with()
    page = client.get(f"{JOBS}{started.pk}/change/").content.decode()
    assert "field-progress_display" in page and "No progress reported yet." in visible(page)
    assert "No checkpoint stored." in visible(page)


def test_the_checkpoint_is_pretty_json_masked_like_the_arguments():
    state = {"cursor": 1200, "api_token": "s3cr3t", "nested": {"password": "hunter2", "page": 3}}
    job = job_with(JobStatus.READY, checkpoint=state)
    client = staff(superuser=True)
    page = client.get(f"{JOBS}{job.pk}/change/").content.decode()
    shown = field(page, "checkpoint_display")
    assert '<pre class="dbjobs-json">' in shown
    assert "&quot;cursor&quot;: 1200" in shown and "&quot;page&quot;: 3" in shown
    assert "s3cr3t" not in page and "hunter2" not in page and shown.count("********") == 2
    with override_settings(DBJOBS_ADMIN_MASKED_JOBS=["tests.jobs.record"]):
        page = client.get(f"{JOBS}{job.pk}/change/").content.decode()
    shown = field(page, "checkpoint_display")
    assert "********" in shown and "cursor" not in shown and "1200" not in page


def test_a_note_with_html_is_escaped_on_the_list_the_page_and_in_the_json():
    note = '<img src=x onerror="alert(1)">'
    job = job_with(progress=reported(1, 2, note), checkpoint={"html": "<b>bold</b>"})
    client = staff(superuser=True)
    answer = poll(client, job.pk, parts=["status_line", "block", "checkpoint"]).json()
    page = client.get(f"{JOBS}{job.pk}/change/").content.decode()
    shown = [
        _rows(client.get(JOBS).content.decode())[job.pk],
        field(page, "progress_display"),
        field(page, "checkpoint_display"),
        *answer["jobs"][job.pk]["parts"].values(),
    ]
    for html in shown:
        assert "<img" not in html and "<b>" not in html
    assert all("&lt;img src=x" in html for html in shown[:2]) and "&lt;b&gt;bold" in shown[2]
    assert answer["jobs"][job.pk]["progress"]["note"] == note, "the data as stored, for code"


def test_the_progress_view_answers_each_job_asked_for_with_its_parts():
    running = job_with(progress=reported(3, 4, "three"))
    finished = job_with(JobStatus.SUCCESSFUL, progress=reported(4, 4))
    response = poll(staff(superuser=True), running.pk, finished.pk, parts=["status_line", "status"])
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"] or "no-store" in response["Cache-Control"]
    answer = response.json()["jobs"]
    assert set(answer) == {running.pk, finished.pk}
    assert answer[running.pk]["running"] is True and answer[finished.pk]["running"] is False
    assert answer[finished.pk]["status"] == "SUCCESSFUL"
    assert answer[running.pk]["progress"]["done"] == 3 and answer[running.pk]["progress"]["total"] == 4
    assert set(answer[running.pk]["parts"]) == {"status_line", "status"}
    assert "75%" in answer[running.pk]["parts"]["status_line"]
    assert "Successful" in answer[finished.pk]["parts"]["status"]
    assert "data-dbjobs-live" not in json.dumps(answer), "the parts come without their live element"


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("", "Pass the jobs as id=<job id>"),
        ("id=nope", "'nope' is not a job id."),
        ("id=00000000-0000-0000-0000-000000000000&part=arguments", "Unknown part 'arguments'"),
        ("&".join(["id=00000000-0000-0000-0000-000000000000"] * 201), "at most 200 jobs"),
    ],
)
def test_the_progress_view_refuses_bad_requests_clearly(query, error):
    response = staff(superuser=True).get(f"{PROGRESS}?{query}")
    assert response.status_code == 400 and error in response.json()["error"]


def test_the_progress_view_is_for_staff_who_may_view_jobs():
    job = job_with(progress=reported(1, 2))
    url = f"{PROGRESS}?id={job.pk}&part=block"
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    from django.contrib.auth.models import User

    outsider = Client()
    outsider.force_login(User.objects.create_user("outsider", password="x"))
    assert outsider.get(url).status_code == 302, "not staff: the login page"
    assert staff("nobody").get(url).status_code == 403, "staff without the view permission"
    allowed = staff("viewer", "django_dbjobs.view_job").get(url)
    assert allowed.status_code == 200 and job.pk in allowed.json()["jobs"]


def test_the_progress_view_answers_get_only():
    job = job_with(progress=reported(1, 2))
    assert staff(superuser=True).post(f"{PROGRESS}?id={job.pk}").status_code == 405


def test_the_progress_view_lets_a_deleted_job_go_unanswered():
    job = job_with(progress=reported(1, 2))
    Job.objects.filter(pk=job.pk).delete()
    assert poll(staff(superuser=True), job.pk).json() == {"jobs": {}}


def test_a_batch_page_sums_its_jobs_progress_in_one_query():
    with batch(description="import") as b:
        queued = [enqueue(jobs.record, str(n)) for n in range(6)]
    states = [
        (JobStatus.RUNNING, reported(30, 100)),  # 30 of 100
        (JobStatus.RUNNING, reported(500, note="no total")),  # left out: no total
        (JobStatus.SUCCESSFUL, reported(80, 200)),  # complete: 200 of 200
        (JobStatus.FAILED, reported(5, 50)),  # as reported: 5 of 50
        (JobStatus.READY, None),  # left out: no report
        (JobStatus.RUNNING, reported(90, 40)),  # past its total: 40 of 40
    ]
    for job, (status, progress) in zip(queued, states, strict=True):
        Job.objects.filter(pk=job.pk).update(status=status, progress_state=progress)
    client = staff(superuser=True)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"{BATCHES}{b.pk}/change/").content.decode()
    shown = visible(page)
    assert "275 of 390 (70%)" in shown, shown
    assert "summed over the 4 of 6 jobs that reported a total" in shown
    assert '<progress class="dbjobs-bar" max="100" value="70.5"' in page
    assert "1 done, 1 failed, 4 pending of 6" in shown, "the jobs' statuses, from the same query"
    job_reads = [query["sql"] for query in queries if "progress_state" in query["sql"]]
    assert len(job_reads) == 1 and "GROUP BY" in job_reads[0].upper(), job_reads


def test_a_batch_whose_jobs_report_no_total_says_so():
    with batch(description="quiet") as b:
        job = enqueue(jobs.record, "a")
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, progress_state=reported(5))
    shown = visible(staff(superuser=True).get(f"{BATCHES}{b.pk}/change/").content.decode())
    assert "No job of this batch reported a total yet." in shown


def test_a_dead_letters_page_shows_its_last_progress_and_checkpoint():
    job = failed_job(progress_state=reported(3, 9, "stuck on page 3"), checkpoint_state={"page": 3})
    shown = visible(
        staff(superuser=True).get(f"/admin/django_dbjobs/failedjob/{job.pk}/change/").content.decode()
    )
    assert "3 of 9 (33%)" in shown and "stuck on page 3" in shown and '"page": 3' in shown


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_progress_view_follows_a_job_a_real_worker_runs(run_jobs):
    job = enqueue(long_jobs.count_slowly, 8)
    worker = run_jobs()
    client = staff(superuser=True)
    seen = []

    def moved() -> bool:
        state = poll(client, job.pk, parts=["block", "status"]).json()["jobs"][job.pk]
        if state["running"] and state["progress"]:
            seen.append(state["progress"]["done"])
        return len(set(seen)) >= 2

    assert wait_for(moved, 30, interval=0.3), f"no progress seen moving: {seen}\n{worker.output()}"
    assert seen == sorted(seen) and 0 <= seen[0] < 40
    assert wait_for(lambda: not poll(client, job.pk).json()["jobs"][job.pk]["running"], 30)
    final = poll(client, job.pk, parts=["block", "status", "checkpoint"]).json()["jobs"][job.pk]
    assert final["status"] == "SUCCESSFUL"
    assert final["progress"]["done"] == final["progress"]["total"] == 40
    assert "all done" in final["parts"]["block"] and "Successful" in final["parts"]["status"]
    assert "&quot;step&quot;: 8" in final["parts"]["checkpoint"]
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
