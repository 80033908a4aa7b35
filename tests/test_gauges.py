"""The database gauges and their view: exact values after known rows, queries, and who may read them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, RequestFactory
from django.utils.connection import ConnectionDoesNotExist
from prometheus_client.parser import text_string_to_metric_families

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.observability.gauges_view import metrics_view
from tests import jobs
from tests.conftest import live_worker
from tests.gauges_helpers import TOKEN, URL, known_rows, of, scrape

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parent.parent


def test_the_gauges_after_a_known_set_of_rows(settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    known_rows(settings)
    status, samples = scrape(Authorization=f"Bearer {TOKEN}")
    assert status == 200
    states = {
        queue: tuple(
            of(samples, "dbjobs_jobs", queue=queue, state=state)
            for state in ("ready_due", "ready_later", "running", "failed")
        )
        for queue in ("default", "rated", "flows", "batched", "emails", "reports")
    }
    assert states == {
        "default": (5, 1, 1, 0),
        "rated": (1, 0, 2, 0),
        "flows": (1, 1, 0, 0),
        "batched": (1, 0, 0, 0),
        "emails": (0, 0, 0, 2),
        "reports": (1, 0, 0, 0),
    }
    blocked = {
        (queue, reason): of(samples, "dbjobs_jobs_blocked", queue=queue, reason=reason)
        for queue in ("default", "rated", "flows")
        for reason in ("concurrency", "rate", "dependencies")
    }
    assert {key: value for key, value in blocked.items() if value} == {
        ("default", "concurrency"): 3,
        ("rated", "rate"): 1,
        ("flows", "dependencies"): 1,
    }
    assert 590 < of(samples, "dbjobs_queue_lag_seconds", queue="default") < 900
    assert 0 <= of(samples, "dbjobs_queue_lag_seconds", queue="rated") < 300
    assert of(samples, "dbjobs_queue_lag_seconds", queue="emails") == 0
    assert [of(samples, "dbjobs_dead_letters", queue=q) for q in ("emails", "default")] == [2, 0]
    assert [of(samples, "dbjobs_queue_paused", queue=q) for q in ("reports", "default")] == [1, 0]
    assert [of(samples, "dbjobs_queue_workers", queue=q) for q in ("default", "emails", "reports")] == [
        2,
        1,
        1,
    ]
    assert of(samples, "dbjobs_workers") == 2, "h:3:c's heartbeat is an hour old"
    workers = {"1": (4, 1), "2": (2, 2)}  # by pid, on host "h": the worker's id is no label
    for pid, (threads, running) in workers.items():
        labels = {"hostname": "h", "pid": pid}
        assert of(samples, "dbjobs_worker_threads", **labels) == threads
        assert of(samples, "dbjobs_worker_running_jobs", **labels) == running
    assert not [key for key in samples if ("pid", "3") in key or "worker" in dict(key[1:])]
    assert of(samples, "dbjobs_concurrency_keys_at_limit") == 1
    assert [of(samples, f"dbjobs_queue_rate_{name}", queue="rated") for name in ("used", "limit")] == [2, 5]
    assert of(samples, "dbjobs_queue_rate_period_seconds", queue="rated") == 60
    assert of(samples, "dbjobs_jobs_cancelling") == 1
    assert of(samples, "dbjobs_batches_open") == 1
    assert 0 <= of(samples, "dbjobs_batch_oldest_open_age_seconds") < 300
    assert of(samples, "dbjobs_workflows_stuck") == 0


def test_two_live_rows_of_one_host_and_pid_are_one_series(settings):
    """A container restarted with its hostname and pid while its old row is still live: added up."""
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    live_worker("box:1:old", concurrency=4)
    live_worker("box:1:new", concurrency=2)
    response = Client().get(URL, headers={"Authorization": f"Bearer {TOKEN}"})
    threads = [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
        if sample.name == "dbjobs_worker_threads"
    ]
    assert threads == [({"hostname": "box", "pid": "1"}, 6.0)]


def test_an_empty_table_gives_zeros_and_no_queue_rows(settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    status, samples = scrape(Authorization=f"Bearer {TOKEN}")
    assert status == 200
    assert not [key for key in samples if key[0] == "dbjobs_jobs"]
    assert of(samples, "dbjobs_workers") == 0 and of(samples, "dbjobs_batches_open") == 0


def test_the_queries_do_not_grow_with_queues_workers_or_jobs(settings, django_assert_max_num_queries):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    known_rows(settings)
    # 14, and two for what holds back the cleanup of dead rows (none on SQLite).
    with django_assert_max_num_queries(16) as small:
        assert scrape(Authorization=f"Bearer {TOKEN}")[0] == 200
    for n in range(20):
        live_worker(f"x:{n + 10}:w", queues=[f"q{n}"])
        enqueue(jobs.add, n, n, queue=f"q{n}")
        Job.objects.create(name="tests.jobs.add", queue=f"q{n}", status=JobStatus.FAILED)
    with django_assert_max_num_queries(len(small.captured_queries)):
        status, samples = scrape(Authorization=f"Bearer {TOKEN}")
    assert status == 200 and of(samples, "dbjobs_dead_letters", queue="q19") == 1


@pytest.mark.parametrize(
    ("token", "header", "status"),
    [
        (TOKEN, f"Bearer {TOKEN}", 200),
        (TOKEN, f"bearer {TOKEN}", 200),
        (TOKEN, f"Bearer {TOKEN}x", 401),
        (TOKEN, f"Basic {TOKEN}", 401),
        (TOKEN, "Bearer ", 401),
        (TOKEN, None, 401),
        (None, "Bearer ", 401),
        ("", "Bearer ", 401),
        (None, "Bearer None", 401),
        (None, None, 401),
    ],
)
def test_a_scraper_needs_the_token(settings, token, header, status):
    settings.DBJOBS_METRICS_TOKEN = token
    response = Client().get(URL, headers={"Authorization": header} if header else {})
    assert response.status_code == status
    if status != 200:
        assert b"dbjobs_" not in response.content
        assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("staff", "active", "status"), [(True, True, 200), (False, True, 403), (True, False, 401)]
)
def test_a_logged_in_user_needs_to_be_active_staff(settings, staff, active, status):
    settings.DBJOBS_METRICS_TOKEN = None
    user = User.objects.create_user("someone", password="x", is_staff=staff, is_active=active)
    client = Client()
    client.force_login(user)
    response = client.get(URL)
    assert response.status_code == status
    assert (b"# TYPE dbjobs_workers gauge" in response.content) == (status == 200)


def test_a_wrong_token_is_refused_even_for_staff(settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    client = Client()
    client.force_login(User.objects.create_user("ops", password="x", is_staff=True))
    assert client.get(URL).status_code == 200
    assert client.get(URL, headers={"Authorization": "Bearer nope"}).status_code == 401


def test_a_proxys_basic_credentials_leave_the_staff_session_in_charge(settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    client = Client()
    client.force_login(User.objects.create_user("ops", password="x", is_staff=True))
    assert client.get(URL, headers={"Authorization": "Basic b3BzOnB3"}).status_code == 200
    assert Client().get(URL, headers={"Authorization": "Basic b3BzOnB3"}).status_code == 401


def test_only_reads_are_served(settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    response = Client().post(URL, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 405


def test_without_prometheus_client_the_view_says_what_to_install(settings, monkeypatch):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    assert Client().get(URL).status_code == 401, "refused before anything is imported"
    with pytest.raises(ImproperlyConfigured, match=r"django-dbjobs\[prometheus\]"):
        Client().get(URL, headers={"Authorization": f"Bearer {TOKEN}"})


def test_mounting_the_view_imports_no_prometheus_client():
    code = (
        "import sys, django; django.setup(); import tests.urls; "
        "assert 'prometheus_client' not in sys.modules, 'imported'"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def test_the_view_reads_the_database_it_is_given(settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    request = RequestFactory().get(URL, headers={"Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(ConnectionDoesNotExist):
        metrics_view(request, using="elsewhere")
    assert metrics_view(request, using="default").status_code == 200
