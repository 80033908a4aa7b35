"""A job module that raises on import: the admin pages stay up and say so; the worker still refuses."""

import logging

import pytest
from django.test import override_settings

from django_dbjobs import registry
from django_dbjobs.models import Job, Schedule

from .admin_helpers import failed_job, schedule_form, staff, text

pytestmark = pytest.mark.django_db(transaction=True)

BROKEN = "dbjobs_test_broken_jobs"


@pytest.fixture
def broken_module(tmp_path, monkeypatch):
    """A module in DBJOBS_JOB_MODULES that raises on import, as a user's module with a bug does."""
    (tmp_path / f"{BROKEN}.py").write_text('raise RuntimeError("settings.SHOP_API_URL is not set")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    # As in a process that has not imported the job modules yet (raising=False: before this change).
    monkeypatch.setattr(registry, "_import_errors", None, raising=False)
    monkeypatch.setattr(registry, "_discovered", False)
    with override_settings(DBJOBS_JOB_MODULES=[BROKEN]):
        yield


def test_the_job_pages_stay_up_show_the_error_and_log_it_once(broken_module, caplog):
    dead = failed_job()
    schedule = Schedule.objects.create(name="nightly", cron="0 3 * * *", job="tests.jobs.scheduled")
    client = staff(superuser=True)
    pages = [
        "/admin/django_dbjobs/job/",
        "/admin/django_dbjobs/job/?name=tests.jobs.always_fails",
        f"/admin/django_dbjobs/job/?q={dead.pk}",
        f"/admin/django_dbjobs/job/{dead.pk}/change/",
        "/admin/django_dbjobs/failedjob/",
        f"/admin/django_dbjobs/failedjob/{dead.pk}/change/",
        "/admin/django_dbjobs/schedule/",
        "/admin/django_dbjobs/schedule/add/",
        f"/admin/django_dbjobs/schedule/{schedule.pk}/change/",
        # The pages a newcomer opens first: the app's index, its overview, its queues.
        "/admin/django_dbjobs/",
        "/admin/django_dbjobs/overview/",
        "/admin/django_dbjobs/queue/",
    ]
    with caplog.at_level(logging.ERROR, logger="django_dbjobs"):
        for url in pages:
            response = client.get(url)
            assert response.status_code == 200, url
            page = text(response)
            assert (
                f"Job module {BROKEN} failed to import: RuntimeError: settings.SHOP_API_URL is not set"
                in page
            )
        listed = text(client.get("/admin/django_dbjobs/job/"))
        assert "tests.jobs.scheduled" in listed, "the other modules' jobs are still in the filter"
    logged = [record for record in caplog.records if BROKEN in record.getMessage()]
    assert len(logged) == 1, [record.getMessage() for record in logged]
    assert logged[0].exc_info and "SHOP_API_URL" in str(logged[0].exc_info[1])


def test_the_schedule_form_and_run_now_report_it_instead_of_failing(broken_module):
    schedule = Schedule.objects.create(name="nightly", cron="0 3 * * *", job="tests.jobs.scheduled")
    orphan = Schedule.objects.create(name="orphan", cron="0 3 * * *", job="tests.jobs.scheduled")
    Schedule.objects.filter(pk=orphan.pk).update(job=f"{BROKEN}.report")  # its job is in the broken module
    client = staff(superuser=True)
    data = schedule_form()
    response = client.post("/admin/django_dbjobs/schedule/add/", {**data, "job": f"{BROKEN}.report"})
    assert response.status_code == 200
    errors = response.context["adminform"].form.non_field_errors()
    assert any(BROKEN in error and "cannot be checked until it imports" in error for error in errors), errors
    assert not Schedule.objects.filter(name="hourly").exists()
    response = client.post("/admin/django_dbjobs/schedule/add/", data, follow=True)  # its module imports
    (added,) = client.messages(response)
    assert "hourly</a>” was added successfully" in added
    assert Schedule.objects.get(name="hourly").job == "tests.jobs.scheduled"
    response = client.post(f"/admin/django_dbjobs/schedule/{orphan.pk}/run-now/", follow=True)
    assert response.status_code == 200
    (message,) = client.messages(response)
    assert message.startswith("Schedule orphan was not run: Job module dbjobs_test_broken_jobs failed")
    response = client.post(f"/admin/django_dbjobs/schedule/{schedule.pk}/run-now/", follow=True)
    assert client.messages(response)[0].startswith("Schedule nightly enqueued job"), "its module imports"
    assert Job.objects.filter(name="tests.jobs.scheduled").count() == 1


def test_the_worker_still_refuses_to_start_on_it(broken_module):
    registry.discovered_with_errors()  # the admin looked first
    with pytest.raises(RuntimeError, match="SHOP_API_URL"):
        registry.autodiscover()
