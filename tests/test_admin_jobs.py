"""The job list and detail page: read-only, fast on big tables, escaped and masked."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from django_dbjobs.admin import listing
from django_dbjobs.models import Job, JobStatus

from .admin_helpers import action, failed_job, staff, text

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/admin/django_dbjobs/job/"


def test_job_list_shows_newest_first_with_status_and_filters():
    old = Job.objects.create(name="tests.jobs.add", args=[1, 2], queue="default")
    new = Job.objects.create(name="tests.jobs.send_email", args=["a@b.c"], queue="emails", priority=5)
    client = staff(superuser=True)
    response = client.get(LIST)
    assert response.status_code == 200
    page = text(response)
    assert page.index(new.pk[-12:]) < page.index(old.pk[-12:])
    for expected in ("By status", "By queue", "By job", "By priority", "emails", "tests.jobs.send_email"):
        assert expected in page
    assert text(client.get(LIST + "?queue=emails")).count('class="action-select"') == 1
    assert text(client.get(LIST + "?priority=high")).count('class="action-select"') == 1
    assert text(client.get(LIST + "?status=READY&name=tests.jobs.add")).count('class="action-select"') == 1


def test_job_list_never_counts_the_whole_table():
    for n in range(5):
        Job.objects.create(name="tests.jobs.add", args=[n, n])
    client = staff(superuser=True)
    client.get(LIST)  # sessions, permissions and content types warm up
    with CaptureQueriesContext(connection) as queries:
        response = client.get(LIST + "?status=READY")
    assert response.status_code == 200
    counts = [query["sql"] for query in queries if "COUNT(" in query["sql"].upper()]
    assert counts, "the paginator counts"
    for sql in counts:
        assert "LIMIT" in sql.upper(), f"an unbounded count: {sql}"
    assert b"_facets" not in response.content, "facet counts would scan the table per filter choice"
    distinct = [query["sql"] for query in queries if "DISTINCT" in query["sql"].upper()]
    assert not distinct, f"a DISTINCT scan for filters or the date hierarchy: {distinct}"


def test_a_capped_count_says_more_than(monkeypatch):
    monkeypatch.setattr(listing, "COUNT_CAP", 3)
    for n in range(5):
        Job.objects.create(name="tests.jobs.add", args=[n, n])
    page = text(staff(superuser=True).get(LIST))
    assert "more than 3 jobs" in page
    assert "5 jobs" not in page


def test_search_matches_exact_id_name_or_unique_key():
    keyed = Job.objects.create(
        name="tests.jobs.add", args=[1, 2], unique_key="invoice-42", active_key="invoice-42"
    )
    other = Job.objects.create(name="tests.jobs.echo")
    client = staff(superuser=True)

    def found(term):
        page = text(client.get(LIST, {"q": term}))
        return {job.pk for job in (keyed, other) if job.pk[-12:] in page}

    assert found(keyed.pk) == {keyed.pk}
    assert found(keyed.pk.upper()) == {keyed.pk}
    assert found("invoice-42") == {keyed.pk}
    assert found("tests.jobs.echo") == {other.pk}
    assert found("tests.jobs") == set()


def test_date_hierarchy_links_come_from_the_first_and_last_job():
    job = Job.objects.create(name="tests.jobs.add", args=[1, 2])
    year = job.enqueued_at.year
    client = staff(superuser=True)
    page = text(client.get(LIST))
    assert f"enqueued_at__year={year}" in page
    drilled = client.get(LIST, {"enqueued_at__year": year, "enqueued_at__month": job.enqueued_at.month})
    assert drilled.status_code == 200
    assert f"enqueued_at__day={job.enqueued_at.day}" in text(drilled)
    assert job.pk[-12:] in text(drilled)


def test_detail_page_shows_arguments_errors_timeline_and_workers():
    job = failed_job(args=[1, {"b": [2, 3]}], kwargs={"flag": True})
    page = text(staff(superuser=True).get(f"{LIST}{job.pk}/change/"))
    for expected in (
        "RuntimeError: boom",
        "Traceback (most recent call last)",
        "host:1:abcd",
        "Enqueued",
        "First started",
        "Attempt 3 failed",
        "Finished: Failed",
        "&quot;flag&quot;: true",
        "3 / 3",
    ):
        assert expected in page, expected
    assert 'name="_save"' not in page  # read-only


def test_detail_page_shows_a_pretty_printed_return_value():
    job = Job.objects.create(name="tests.jobs.echo", status=JobStatus.SUCCESSFUL, return_value={"ok": [1, 2]})
    page = staff(superuser=True).get(f"{LIST}{job.pk}/change/").content.decode()
    assert '"ok": [\n    1,\n    2\n  ]' in page.replace("&quot;", '"')


def test_stored_text_is_escaped_everywhere():
    evil = "<script>alert('x')</script>"
    job = failed_job(args=[evil], kwargs={"html": evil}, last_error=evil, unique_key=evil)
    Job.objects.filter(pk=job.pk).update(
        errors=[{"summary": evil, "traceback": evil, "attempt": 1, "worker": evil, "at": evil}]
    )
    client = staff(superuser=True)
    for url in (LIST, f"{LIST}{job.pk}/change/", "/admin/django_dbjobs/failedjob/", f"{LIST}?q={evil}"):
        body = client.get(url).content.decode()
        assert "<script>alert" not in body, url
    assert "&lt;script&gt;alert" in client.get(f"{LIST}{job.pk}/change/").content.decode()


def test_secret_arguments_are_masked():
    job = Job.objects.create(
        name="tests.jobs.charge",
        args=["tok_live_123", 500],
        kwargs={"note": "hi", "options": {"Api_Key": "k-999", "nested": [{"password": "hunter2"}]}},
        status=JobStatus.SUCCESSFUL,
        return_value={"charged": 500, "api_key": "returned-secret"},
    )
    page = staff(superuser=True).get(f"{LIST}{job.pk}/change/").content.decode()
    for secret in ("tok_live_123", "k-999", "hunter2", "returned-secret"):
        assert secret not in page, secret
    assert "500" in page and "hi" in page and "********" in page


@override_settings(DBJOBS_ADMIN_MASKED_JOBS=["tests.jobs.echo"], DBJOBS_ADMIN_MASKED_ARGUMENTS=[])
def test_masked_jobs_show_no_arguments_or_return_value():
    job = Job.objects.create(
        name="tests.jobs.echo",
        args=["plain"],
        kwargs={"x": "visible?"},
        status=JobStatus.SUCCESSFUL,
        return_value="r",
    )
    page = staff(superuser=True).get(f"{LIST}{job.pk}/change/").content.decode()
    assert "plain" not in page and "visible?" not in page
    assert json.dumps("r") not in page
    other = Job.objects.create(name="tests.jobs.add", kwargs={"password": "shown-when-not-listed"})
    assert (
        "shown-when-not-listed"
        in staff("two", superuser=True).get(f"{LIST}{other.pk}/change/").content.decode()
    )


def test_cancel_deletes_ready_jobs_only():
    ready = Job.objects.create(name="tests.jobs.add", args=[1, 2])
    running = Job.objects.create(name="tests.jobs.add", args=[1, 2], status=JobStatus.RUNNING, worker="w")
    done = Job.objects.create(name="tests.jobs.add", args=[1, 2], status=JobStatus.SUCCESSFUL)
    failed = failed_job()
    client = staff(superuser=True)
    confirm = client.post(LIST, {"action": "cancel", "_selected_action": [ready.pk, running.pk], "index": 0})
    assert "Cancel ready jobs?" in text(confirm)
    assert Job.objects.filter(pk=ready.pk).exists()
    response = action(client, LIST, "cancel", [ready, running, done, failed], post="yes")
    assert client.messages(response) == ["1 ready job cancelled. 3 skipped: not ready (running or finished)."]
    assert set(Job.objects.values_list("pk", flat=True)) == {running.pk, done.pk, failed.pk}


def test_a_ready_job_can_be_deleted_from_its_page_but_not_a_running_one():
    ready = Job.objects.create(name="tests.jobs.add", args=[1, 2])
    running = Job.objects.create(name="tests.jobs.add", args=[1, 2], status=JobStatus.RUNNING, worker="w")
    client = staff(superuser=True)
    page = client.get(f"{LIST}{running.pk}/delete/", follow=True)
    assert client.messages(page) == ["Only a ready job can be deleted here."]
    # Claimed between the page and the POST: the fenced DELETE leaves it, and says so.
    posted = client.post(f"{LIST}{running.pk}/delete/", {"post": "yes"}, follow=True)
    assert client.messages(posted) == ["Nothing deleted: the job is no longer ready."]
    assert Job.objects.get(pk=running.pk).status == JobStatus.RUNNING
    response = client.post(f"{LIST}{ready.pk}/delete/", {"post": "yes"}, follow=True)
    assert client.messages(response) == ["The job was deleted."]
    assert list(Job.objects.values_list("pk", flat=True)) == [running.pk]


def test_no_add_or_edit_of_jobs():
    job = Job.objects.create(name="tests.jobs.add", args=[1, 2])
    client = staff(superuser=True)
    assert client.get(f"{LIST}add/").status_code == 403
    response = client.post(f"{LIST}{job.pk}/change/", {"name": "tests.jobs.echo"})
    assert response.status_code == 403
    assert Job.objects.get(pk=job.pk).name == "tests.jobs.add"


def test_date_drill_down_bounds_the_ids_and_still_finds_the_days_jobs():
    import datetime

    from django.utils import timezone

    today = Job.objects.create(name="tests.jobs.add", args=[1, 2])
    last_year = Job.objects.create(name="tests.jobs.add", args=[3, 4])
    Job.objects.filter(pk=last_year.pk).update(enqueued_at=today.enqueued_at - datetime.timedelta(days=400))
    local = timezone.localtime(Job.objects.get(pk=today.pk).enqueued_at)
    client = staff(superuser=True)
    with CaptureQueriesContext(connection) as queries:
        page = text(
            client.get(
                LIST,
                {
                    "enqueued_at__year": local.year,
                    "enqueued_at__month": local.month,
                    "enqueued_at__day": local.day,
                },
            )
        )
    assert today.pk[-12:] in page and last_year.pk[-12:] not in page
    filtered = [
        sql for sql in (query["sql"] for query in queries) if "enqueued_at" in sql.partition("WHERE")[2]
    ]
    assert len(filtered) >= 2, "the count and the page"
    for sql in filtered:
        where = sql.partition("WHERE")[2].replace("`", '"')
        assert '"django_dbjobs_job"."id" >= ' in where and '"django_dbjobs_job"."id" < ' in where, sql


def test_enqueued_id_range_covers_the_period_with_clock_margins():
    import datetime

    from django.utils import timezone

    from django_dbjobs.admin.listing import enqueued_id_range, id_floor
    from django_dbjobs.models.ids import new_id

    now = timezone.now()
    made = new_id()
    assert (
        id_floor(now - datetime.timedelta(seconds=1)) < made < id_floor(now + datetime.timedelta(seconds=1))
    )
    local = timezone.localtime(now)
    for params in (
        {"enqueued_at__year": str(local.year)},
        {"enqueued_at__year": str(local.year), "enqueued_at__month": str(local.month)},
        {
            "enqueued_at__year": str(local.year),
            "enqueued_at__month": str(local.month),
            "enqueued_at__day": str(local.day),
        },
    ):
        low, high = enqueued_id_range(params)
        assert low < made < high
    assert enqueued_id_range({}) is None
    assert enqueued_id_range({"enqueued_at__year": "2026", "enqueued_at__month": "13"}) is None
    assert enqueued_id_range({"enqueued_at__year": "x"}) is None


@override_settings(DBJOBS_ADMIN_MASKED_JOBS=["tests.jobs.echo"])
def test_a_masked_jobs_unique_key_is_masked_too():
    job = Job.objects.create(
        name="tests.jobs.echo", unique_key="customer-secret-42", active_key="customer-secret-42"
    )
    page = staff(superuser=True).get(f"{LIST}{job.pk}/change/").content.decode()
    assert "customer-secret-42" not in page and "********" in page


def test_odd_dates_and_id_spellings_do_not_break_the_list():
    job = Job.objects.create(name="tests.jobs.add", args=[1, 2])
    client = staff(superuser=True)
    for year in ("1", "2"):  # (9999 is a 500 in Django itself: its year + 1 overflows)
        assert client.get(LIST, {"enqueued_at__year": year}).status_code == 200
    braced = "{" + job.pk.replace("-", "").upper() + "}"
    assert job.pk[-12:] in text(client.get(LIST, {"q": braced}))


def test_actions_other_apps_add_to_every_admin_are_not_offered():
    from django.contrib import admin as django_admin

    def shout(modeladmin, request, queryset):
        queryset.update(status="SUCCESSFUL")

    django_admin.site.add_action(shout, "shout_everywhere")
    try:
        page = staff(superuser=True).get(LIST).content.decode()
    finally:
        django_admin.site.disable_action("shout_everywhere")
    assert 'value="shout_everywhere"' not in page and 'value="cancel"' in page


def test_detail_page_shows_the_enqueuers_context_masked():
    context = {
        "language": "fr",
        "timezone": "Europe/Paris",
        "data": {"request_id": "req-42", "api_token": "tok-SECRET-9"},
    }
    job = Job.objects.create(name="tests.jobs.echo", context=context)
    client = staff(superuser=True)
    page = text(client.get(f"{LIST}{job.pk}/change/")).replace("&quot;", '"')
    assert "enqueuer" in page.lower() and '"language": "fr"' in page and '"request_id": "req-42"' in page
    assert "tok-SECRET-9" not in page and '"api_token": "' in page  # masked
    plain = Job.objects.create(name="tests.jobs.echo")
    assert "req-42" not in text(client.get(f"{LIST}{plain.pk}/change/"))


def test_stop_asks_running_jobs_to_stop_with_the_change_permission_and_logs_it(caplog):
    ready = Job.objects.create(name="tests.jobs.add", args=[1, 2])
    running = Job.objects.create(name="tests.jobs.add", args=[1, 2], status=JobStatus.RUNNING, worker="w")
    viewer = staff("viewer", "django_dbjobs.view_job")
    page = text(viewer.get(LIST))
    assert 'value="stop_running"' not in page  # no change permission: no action
    refused = action(viewer, LIST, "stop_running", [running], post="yes")
    assert Job.objects.get(pk=running.pk).cancel_requested_at is None, refused
    client = staff("ops", "django_dbjobs.view_job", "django_dbjobs.change_job")
    assert 'value="stop_running"' in text(client.get(LIST))
    confirm = client.post(LIST, {"action": "stop_running", "_selected_action": [running.pk], "index": 0})
    assert "Stop running jobs?" in text(confirm)
    assert Job.objects.get(pk=running.pk).cancel_requested_at is None
    with caplog.at_level("INFO", logger="django_dbjobs"):
        response = action(client, LIST, "stop_running", [ready, running], post="yes")
    assert client.messages(response) == [
        "1 running job asked to stop. 1 skipped: not running, or asked already."
    ]
    assert "Admin requested cancellation of running jobs asked=1 skipped=1 by=ops" in caplog.text
    assert Job.objects.get(pk=running.pk).cancel_requested_at is not None
    assert Job.objects.get(pk=ready.pk).status == JobStatus.READY  # left alone
    again = action(client, LIST, "stop_running", [running], post="yes")  # a double submit
    assert client.messages(again) == [
        "0 running jobs asked to stop. 1 skipped: not running, or asked already."
    ]
