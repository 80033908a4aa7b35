"""Reading the database gauges in the tests: known rows to read, one scrape as {(name, labels...): value}."""

import datetime

from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from django_dbjobs import enqueue
from django_dbjobs.flow import admission
from django_dbjobs.flow.rates import Rate, RateLimitedClaims
from django_dbjobs.models import Job, JobStatus, Queue, WorkerProcess
from django_dbjobs.workflows import batch
from tests import jobs
from tests.conftest import live_worker

URL = "/dbjobs/metrics"
TOKEN = "s3cret-scrape-token"


def known_rows(settings) -> None:
    """Six queues, two live workers and a dead one, a key at its limit, a rated queue, an open batch."""
    live_worker("h:1:a", concurrency=4, queues=["default"])
    live_worker("h:2:b", concurrency=2)
    dead = WorkerProcess.objects.create(id="h:3:c", hostname="h", pid=3, concurrency=8, queues=["emails"])
    WorkerProcess.objects.filter(pk=dead.pk).update(heartbeat_at=timezone.now() - datetime.timedelta(hours=1))
    # Key acct:a (limit 2), queue default: one running on h:1:a, one admitted, three waiting.
    for n in range(5):
        enqueue(jobs.keyed_span, "a", n)
    admission.admit("default")
    assert len(Job.objects.claim("h:1:a", limit=1)) == 1
    past = timezone.now() - datetime.timedelta(minutes=10)
    Job.objects.create(name="tests.jobs.add", queue="default", run_at=past)
    Job.objects.create(name="tests.jobs.add", queue="default", run_at=past + datetime.timedelta(hours=1))
    # Queue rated (5 a minute): two started by h:2:b, one of them asked to stop; one waiting.
    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "5/m"}}
    for n in range(3):
        enqueue(jobs.rated_start, n)
    started = RateLimitedClaims("h:2:b", "default").claim("rated", Rate(5, 60), 2, include_waiting=True)
    Job.objects.filter(pk=started[0].pk).request_cancel()
    # Queue flows: one job due, one waiting for it.
    first = enqueue(jobs.add, 1, 1, queue="flows")
    enqueue(jobs.add, 2, 2, queue="flows", after=[first])
    with batch():
        enqueue(jobs.add, 3, 3, queue="batched")
    for _ in range(2):
        Job.objects.create(name="tests.jobs.add", queue="emails", status=JobStatus.FAILED, finished_at=past)
    Job.objects.create(name="tests.jobs.add", queue="emails", status=JobStatus.SUCCESSFUL, finished_at=past)
    Job.objects.create(name="tests.jobs.add", queue="reports", run_at=past)
    Queue.objects.pause(["reports"], by="ops")


def scrape(client=None, **headers) -> tuple[int, dict[tuple, float]]:
    response = (client or Client()).get(URL, headers=headers)
    if response.status_code != 200:
        return response.status_code, {}
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        assert family.type == "gauge", family.name
        for sample in family.samples:
            samples[(sample.name, *sorted(sample.labels.items()))] = sample.value
    return 200, samples


def of(samples: dict, name: str, **labels) -> float:
    return samples[(name, *sorted(labels.items()))]
