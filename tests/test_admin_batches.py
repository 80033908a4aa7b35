"""The admin's batch pages, and what a job's page says of its workflow."""

import re

import pytest

from django_dbjobs import batch, enqueue
from django_dbjobs.models import Job
from django_dbjobs.testing import run_jobs
from tests import jobs

from .admin_helpers import staff, text

pytestmark = pytest.mark.django_db(transaction=True)

BATCHES = "/admin/django_dbjobs/batch/"
JOBS = "/admin/django_dbjobs/job/"


def test_the_batch_pages_show_progress_callbacks_and_the_jobs(record_file):
    callbacks = {"on_success": jobs.batch_succeeded, "on_failure": jobs.batch_failed}
    with batch(description="thumbnails <5000>", **callbacks) as b:
        enqueue(jobs.record, "a")
        enqueue(jobs.always_fails, max_attempts=1)
        enqueue(jobs.record, "c", delay=3600)
    run_jobs()
    client = staff(superuser=True)
    listing = text(client.get(BATCHES))
    assert "thumbnails &lt;5000&gt;" in listing and "<5000>" not in listing, "the description is escaped"
    assert "1 done, 1 failed, 1 pending of 3" in listing
    page = text(client.get(f"{BATCHES}{b.pk}/change/"))
    assert "1 done, 1 failed, 1 pending of 3" in page and "dbjobs-progress-done" in page
    assert "waiting for the batch" in page and page.count("tests.jobs.batch_") == 2
    assert f"{JOBS}?batch={b.pk}" in page.replace("&amp;", "&")
    filtered = text(client.get(f"{JOBS}?batch={b.pk}"))
    assert filtered.count('class="action-select"') == 3
    job = Job.objects.filter(batch=b).first()
    assert "In batch" in text(client.get(f"{JOBS}{job.pk}/change/"))
    callback = text(client.get(f"{JOBS}{b.on_success}/change/"))
    assert "Callback of batch" in callback and "Waiting for other jobs" in callback


def test_the_batch_page_and_its_jobs_pages_have_a_copy_button_for_the_batch_id():
    with batch(description="thumbnails") as b:
        job = enqueue(jobs.record, "a")
    client = staff(superuser=True)
    for url in (f"{BATCHES}{b.pk}/change/", f"{JOBS}{job.pk}/change/"):
        page = client.get(url).content.decode()
        assert re.search(rf'<button type="button" class="button dbjobs-copy" data-copy="{b.pk}"', page), url
        # Its script is a static file, as the admin's own are: a Content-Security-Policy without
        # 'unsafe-inline' lets it run.
        assert re.search(r'<script src="[^"]*django_dbjobs/copy\.js">', page), url
        inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page)
        assert not inline, f"{url}: inline scripts {inline}"


def test_a_job_page_lists_what_it_waits_for_and_the_list_filters_waiting_jobs():
    first = enqueue(jobs.record, "a")
    waiting = enqueue(jobs.record, "b", after=[first], after_failure="run")
    client = staff(superuser=True)
    page = text(client.get(f"{JOBS}{waiting.pk}/change/"))
    assert first.pk in page and "runs anyway" in page
    assert "1 job(s) wait for this one." in text(client.get(f"{JOBS}{first.pk}/change/"))
    assert text(client.get(f"{JOBS}?flow=after")).count('class="action-select"') == 1


def test_a_staff_user_without_job_permissions_cannot_see_batches():
    with batch(description="secret"):
        enqueue(jobs.record, "a")
    assert staff("nobody").get(BATCHES).status_code == 403
    assert staff("viewer", "django_dbjobs.view_job").get(BATCHES).status_code == 200


def test_the_batch_list_reads_no_job_per_batch():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = staff(superuser=True)
    counts = []
    for _ in range(2):
        for n in range(3):
            with batch(description=f"b{n}"):
                enqueue(jobs.record, n)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(BATCHES).status_code == 200
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1], counts
