"""Flow control where users look: dbjobs_status (table and JSON) and the admin."""

import io
import json
import re

import pytest
from django.core.management import call_command

from django_dbjobs import enqueue
from django_dbjobs.flow import admission
from django_dbjobs.flow.rates import Rate, RateLimitedClaims
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from tests import jobs
from tests.conftest import live_worker

from .admin_helpers import staff, text

pytestmark = pytest.mark.django_db(transaction=True)


def status(*args):
    if not WorkerProcess.objects.exists():
        live_worker()  # a worker serves every queue: no problem to exit 1 with
    out = io.StringIO()
    call_command("dbjobs_status", *args, stdout=out)
    return out.getvalue()


def a_key_at_its_limit():
    """Key acct:a (limit 2): one running, one admitted, three waiting."""
    for n in range(5):
        enqueue(jobs.keyed_span, "a", n)
    admission.admit("default")
    Job.objects.claim("w1", limit=1)


def test_status_shows_keys_at_their_limit_rate_use_and_jobs_asked_to_stop(settings):
    a_key_at_its_limit()
    enqueue(jobs.keyed_span, "b", 1)  # a key with a free slot: not shown
    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "5/m"}}
    for n in range(3):
        enqueue(jobs.rated_start, n)
    RateLimitedClaims("w2", "default").claim("rated", Rate(5, 60), 2, include_waiting=True)
    Job.objects.filter(status=JobStatus.RUNNING, queue="rated").request_cancel()
    table = status()
    assert "Key 'acct:a' at its limit: 2/2 in use, 3 waiting" in table
    assert "acct:b" not in table
    assert "Queue 'rated' rate 5/60s: 2/5 used in the last period" in table
    assert "Running jobs asked to stop: 2" in table
    flow = json.loads(status("--json"))["flow"]
    assert flow["keys_at_limit"] == [{"key": "acct:a", "limit": 2, "running": 1, "admitted": 1, "waiting": 3}]
    assert flow["rate_limits"] == [
        {"queue": "rated", "rate": "5/60s", "period_seconds": 60.0, "limit": 5, "used_in_last_period": 2}
    ]
    assert flow["cancel_requested_running"] == 2


def test_without_flow_control_status_says_nothing_of_it():
    enqueue(jobs.add, 1, 2)
    assert "limit" not in status() and "asked to stop" not in status()
    assert json.loads(status("--json"))["flow"] == {
        "keys_at_limit": [],
        "more_keys_at_limit": 0,
        "rate_limits": [],
        "cancel_requested_running": 0,
    }


def test_the_admin_shows_keys_rates_waiting_stopping_and_cancelled_jobs(settings):
    a_key_at_its_limit()
    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "20/10s"}}
    enqueue(jobs.rated_start, 1)
    running = Job.objects.filter(status=JobStatus.RUNNING).get()
    Job.objects.filter(pk=running.pk).request_cancel()
    cancelled = enqueue(jobs.add, 1, 1)
    Job.objects.filter(pk=cancelled.pk).update(
        status=JobStatus.FAILED,
        errors=[
            {"exception_class_path": "django_dbjobs.exceptions.JobCancelled", "summary": "JobCancelled: x"}
        ],
    )
    client = staff(superuser=True)
    queues = text(client.get("/admin/django_dbjobs/queue/"))
    keys = re.search(r'<table class="dbjobs-table" id="dbjobs-keys">(.*?)</table>', queues, re.S).group(1)
    assert re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", keys)).split()[-5:] == ["acct:a", "1", "1", "2", "3"]
    rated = re.search(r'<tr data-queue="rated">(.*?)</tr>', queues, re.S).group(1)
    assert "0 / 20 per 10 s" in rated
    assert "1 running job was asked to stop" in queues
    listing = text(client.get("/admin/django_dbjobs/job/"))
    assert listing.count("Waiting for a slot of acct:a") == 3
    assert "Running, asked to stop" in listing and "Cancelled" in listing
    stopping = text(client.get("/admin/django_dbjobs/job/?flow=stopping"))
    assert stopping.count('class="action-select"') == 1
    waiting = text(client.get("/admin/django_dbjobs/job/?flow=waiting"))
    assert waiting.count('class="action-select"') == 3


def test_a_job_page_shows_its_key_and_when_it_was_asked_to_stop():
    job = enqueue(jobs.keyed_span, "a", 1)
    admission.admit("default")
    Job.objects.claim("w1")
    Job.objects.filter(pk=job.pk).request_cancel()
    page = text(staff(superuser=True).get(f"/admin/django_dbjobs/job/{job.pk}/change/"))
    assert "acct:a (at most 2 at once)" in page
    assert "Asked to stop (cancel)" in page and "Running, asked to stop" in page
