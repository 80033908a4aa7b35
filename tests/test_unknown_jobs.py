"""A job no worker would know is never silent: enqueue, the checks, the worker's log, status."""

import io
import json
import logging

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_dbjobs import checks, enqueue
from django_dbjobs.exceptions import UnimportedJobWarning
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.operations import unknown_jobs
from django_dbjobs.registry import discovery
from django_dbjobs.worker import Worker
from tests import job_elsewhere, jobs, reexported_job
from tests.conftest import live_worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_warnings():
    """Every test sees each job name for the first time (the warning is once per name)."""
    discovery.forget()
    unknown_jobs._explained.clear()
    yield
    discovery.forget()


def test_enqueue_warns_once_per_job_defined_outside_the_modules_workers_import(caplog):
    with caplog.at_level(logging.WARNING, logger="django_dbjobs"):
        with pytest.warns(UnimportedJobWarning) as warned:
            enqueue(job_elsewhere.stray, 1)
            enqueue(job_elsewhere.stray, 2)
    assert len(warned) == 1 and isinstance(warned[0].message, RuntimeWarning)
    message = str(warned[0].message)
    assert (
        "tests.job_elsewhere.stray is defined in tests.job_elsewhere, which workers do not import" in message
    )
    assert "Workers import tests.jobs and tests.tasks." in message
    assert "or add 'tests.job_elsewhere' to DBJOBS_JOB_MODULES" in message
    assert warned[0].filename == __file__, "the warning points at the caller's enqueue()"
    logged = [r.getMessage() for r in caplog.records if "workers do not import" in r.getMessage()]
    assert logged == [message]
    assert Job.objects.filter(name="tests.job_elsewhere.stray").count() == 2, (
        "the jobs are stored all the same"
    )


@pytest.mark.filterwarnings("error::django_dbjobs.exceptions.UnimportedJobWarning")
def test_jobs_workers_import_are_not_warned_about():
    enqueue(jobs.add, 1, 2)  # the tests app's jobs module
    enqueue(reexported_job.reexported, 1)  # defined elsewhere, imported by tests/jobs.py


def test_dbjobs_job_modules_silences_the_warning(settings, recwarn):
    settings.DBJOBS_JOB_MODULES = ["tests.job_elsewhere"]
    enqueue(job_elsewhere.stray, 1)
    assert not [w for w in recwarn if issubclass(w.category, UnimportedJobWarning)]


def test_system_check_w004_names_each_job_workers_would_not_know():
    import tests.job_elsewhere  # noqa: F401 - registered in this process, as a view's import would

    found = {w.obj: w for w in checks.unimported_job_warnings()}
    assert {"tests.job_elsewhere.stray", "tests.job_elsewhere.other_stray"} <= set(found)
    assert "tests.reexported_job.reexported" not in found and "tests.jobs.add" not in found
    warning = found["tests.job_elsewhere.stray"]
    assert warning.id == "dbjobs.W004"
    assert "DBJOBS_JOB_MODULES" in warning.hint and "tests.jobs and tests.tasks" in warning.hint


def test_the_hand_back_names_the_worker_and_the_log_explains_once_per_name(caplog):
    first = Job.objects.create(name="shop.helpers.send_receipt", args=[1])
    second = Job.objects.create(name="shop.helpers.send_receipt", args=[2])
    with caplog.at_level(logging.WARNING, logger="django_dbjobs"):
        worker = Worker(burst=True)
        worker.run()
    hand_backs = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Job handed back")]
    assert len(hand_backs) == 2
    explained = [line for line in hand_backs if "DBJOBS_JOB_MODULES" in line]
    assert len(explained) == 1, hand_backs
    assert "Workers import tests.jobs and tests.tasks." in explained[0]
    for job in (first, second):
        job.refresh_from_db()
        assert job.status == JobStatus.READY and job.attempts == 0
        assert job.last_error.startswith(
            f"Handed back: 'shop.helpers.send_receipt' is not a registered job in worker {worker.id}."
        ), job.last_error
        assert unknown_jobs.is_waiting(job)
        assert unknown_jobs.dead_letter_at(job.enqueued_at) > job.enqueued_at


def test_dbjobs_status_reports_jobs_a_worker_did_not_know():
    Job.objects.create(name="shop.helpers.send_receipt", args=[1])
    Worker(burst=True).run()
    live_worker("h:1:a")
    with pytest.raises(
        CommandError, match="'shop.helpers.send_receipt' .* 1 ready jobs that a worker did not know"
    ):
        call_command("dbjobs_status", stdout=io.StringIO())
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("dbjobs_status", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert [(u["name"], u["queue"], u["ready"]) for u in report["unknown_jobs"]] == [
        ("shop.helpers.send_receipt", "default", 1)
    ]
    assert report["healthy"] is False


def shown(response) -> str:
    """The page's text with entities decoded (the admin escapes the quotes of stored text)."""
    import html

    from tests.admin_helpers import text

    return html.unescape(text(response))


def test_the_admin_shows_such_a_job_as_waiting_for_a_worker_that_knows_it():
    from tests.admin_helpers import staff

    job = Job.objects.create(name="shop.helpers.send_receipt", args=[1])
    Worker(burst=True).run()
    client = staff(superuser=True)
    listed = shown(client.get("/admin/django_dbjobs/job/"))
    assert "Waiting for a worker that knows it" in listed
    assert "dead-lettered in 59 min unless a worker knows it" in listed or "dead-lettered in 60 min" in listed
    page = shown(client.get(f"/admin/django_dbjobs/job/{job.pk}/change/"))
    assert "Waiting for a worker that knows it" in page
    assert "'shop.helpers.send_receipt' is not a registered job in worker" in page, "the reason is shown"
    ordinary = Job.objects.create(name="tests.jobs.add", args=[1, 2])
    assert "Waiting for a worker" not in shown(client.get(f"/admin/django_dbjobs/job/{ordinary.pk}/change/"))
    overview = shown(client.get("/admin/django_dbjobs/overview/"))
    assert "1 job waits for a worker that knows it" in overview
    assert (
        "'shop.helpers.send_receipt' (queue 'default'): 1 ready jobs that a worker did not know" in overview
    )


def test_the_admin_overview_says_when_no_worker_serves_a_queue():
    from tests.admin_helpers import staff

    enqueue(jobs.add, 1, 2, queue="emials")
    live_worker("h:1:a", queues=["default", "emails"])
    client = staff(superuser=True)
    for page in ("/admin/django_dbjobs/overview/", "/admin/django_dbjobs/queue/"):
        page_text = shown(client.get(page))
        assert "No worker serves this queue" in page_text, page
        assert (
            "queue 'emials': 1 due jobs and no live worker serves it (live workers serve default, emails)"
            in page_text
        )
    live_worker("h:2:b", queues=["emials"])
    page_text = shown(client.get("/admin/django_dbjobs/overview/"))
    assert "No worker serves this queue" not in page_text and "no live worker serves it" not in page_text


def test_a_job_failing_with_an_unknown_job_error_of_its_own_is_an_ordinary_failure():
    from django_dbjobs.testing import run_jobs

    job = enqueue(jobs.enqueues_a_name_that_is_not_a_job)
    (ran,) = run_jobs()
    assert ran.status == JobStatus.READY and ran.last_error.startswith("UnknownJob: 'shop.jobs.misspelled'")
    assert not unknown_jobs.is_waiting(ran)
    assert unknown_jobs.waiting() == []
    live_worker("h:1:a")
    call_command("dbjobs_status", stdout=io.StringIO())  # no problem reported
    assert Job.objects.get(pk=job.pk).status == JobStatus.READY


def test_a_knowing_worker_that_gives_the_job_back_clears_the_hand_back():
    job = Job.objects.create(name="shop.helpers.send_receipt", args=[1])
    Worker(burst=True).run()
    job.refresh_from_db()
    assert unknown_jobs.is_waiting(job)
    # A worker of the new release claims it, then is stopped (or dies) before running it.
    Job.objects.filter(pk=job.pk).update(run_at=job.enqueued_at)  # due now, not after the hand-back's delay
    (claimed,) = Job.objects.claim("new-release:1:a", 1)
    assert Job.objects.release_all("new-release:1:a", [claimed]) == 1
    job.refresh_from_db()
    assert job.status == JobStatus.READY and job.last_error == "" and not unknown_jobs.is_waiting(job)


@pytest.mark.filterwarnings("error::django_dbjobs.exceptions.UnimportedJobWarning")
def test_where_warnings_are_errors_every_enqueue_of_such_a_job_raises():
    for _ in range(2):
        with pytest.raises(UnimportedJobWarning):
            enqueue(job_elsewhere.stray, 1)
    assert not Job.objects.exists()
