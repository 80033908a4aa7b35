"""A real Prometheus server scrapes run_jobs --metrics-port and reads a known workload back through its API.

Runs only with DBJOBS_TEST_PROMETHEUS=1 (.ci/run sets it): it starts a server process.
"""

import datetime
import os
import signal
from pathlib import Path

import pytest
from django.utils import timezone

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from tests import jobs
from tests.conftest import live_worker, wait_for
from tests.prometheus_server import OPT_IN, PrometheusServer, Target
from tests.server_process import free_port

ALERT_RULES = Path(__file__).resolve().parent.parent / "docs" / "observability" / "alerts.yml"
TOKEN = "dbjobs-prometheus-test-token"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        os.environ.get(OPT_IN) != "1",
        reason=f"starts a Prometheus server (Debian's prometheus); set {OPT_IN}=1 to run it (CI does)",
    ),
]


@pytest.fixture
def prometheus(tmp_path):
    """Start a Prometheus server scraping a list of Targets; each is stopped after the test."""
    started = []

    def start(targets: list[Target], rule_files: tuple = ()) -> PrometheusServer:
        directory = tmp_path / f"prometheus{len(started)}"
        directory.mkdir()
        server = PrometheusServer(targets, directory, rule_files)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_prometheus_reads_back_a_worker_and_a_supervisors_counts(run_jobs, prometheus):
    ports = free_port(), free_port()
    local = ("--metrics-address", "127.0.0.1", "--metrics-port")
    alone = run_jobs("--queues", "default", *local, str(ports[0]))
    supervisor = run_jobs("--queues", "emails", "--processes", "2", *local, str(ports[1]))
    server = prometheus([Target(f"127.0.0.1:{port}") for port in ports], rule_files=(ALERT_RULES,))
    assert wait_for(lambda: WorkerProcess.objects.count() == 3, 60), alone.output() + supervisor.output()
    up = {(("instance", f"127.0.0.1:{port}"), ("job", f"target{n}")): 1.0 for n, port in enumerate(ports)}
    assert server.settles("up", up) == up, server.output()
    for n in range(3):
        enqueue(jobs.add, n, n)
    enqueue(jobs.always_fails)  # retried twice, then dead-lettered
    enqueue(jobs.swallows_exceptions)  # timed out, then dead-lettered: failed, and timed out
    for n in range(4):
        enqueue(jobs.send_email, f"{n}@example.com")  # the "emails" queue: the supervisor's children
    finished = lambda: Job.objects.filter(status__in=[JobStatus.SUCCESSFUL, JobStatus.FAILED]).count() == 9  # noqa: E731
    assert wait_for(finished, 60), alone.output() + supervisor.output()
    outcomes = {
        (("outcome", "succeeded"), ("queue", "default")): 3.0,
        (("outcome", "retried"), ("queue", "default")): 2.0,
        (("outcome", "failed"), ("queue", "default")): 2.0,
        (("outcome", "succeeded"), ("queue", "emails")): 4.0,
    }
    query = "sum by (queue, outcome) (dbjobs_jobs_finished_total)"
    assert server.settles(query, outcomes) == outcomes, server.output()
    runs = {(("job_name", "tests.jobs.add"),): 3.0, (("job_name", "tests.jobs.always_fails"),): 3.0}
    runs[(("job_name", "tests.jobs.send_email"),)] = 4.0
    runs[(("job_name", "tests.jobs.swallows_exceptions"),)] = 1.0
    assert server.settles("sum by (job_name) (dbjobs_job_duration_seconds_count)", runs) == runs
    timed_out = {(("job_name", "tests.jobs.swallows_exceptions"), ("queue", "default")): 1.0}
    assert server.settles("sum by (queue, job_name) (dbjobs_jobs_timed_out_total)", timed_out) == timed_out
    delays = {(("queue", "default"),): 7.0, (("queue", "emails"),): 4.0}
    assert server.settles("sum by (queue) (dbjobs_job_start_delay_seconds_count)", delays) == delays
    # No gauges' view is scraped here: dbjobs_workers is absent, which DbjobsNoLiveWorker
    # takes for no worker (it fires after its "for" of 2 minutes).
    absent = {(("alertname", "DbjobsNoLiveWorker"), ("alertstate", "pending"), ("severity", "critical")): 1.0}
    assert server.settles('ALERTS{alertname="DbjobsNoLiveWorker"}', absent) == absent, server.output()
    for worker in (alone, supervisor):
        worker.process.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, worker.output()


def test_prometheus_reads_the_database_gauges_and_evaluates_the_alert_rules(
    live_server, prometheus, settings
):
    """The view behind a bearer token, scraped; the docs' alert rules load, evaluate, and one goes pending."""
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    live_worker("h:1:a", concurrency=2, queues=["default"])  # nobody serves "emails"
    for n in range(3):
        enqueue(jobs.add, n, n)
    for n in range(2):
        enqueue(jobs.send_email, f"{n}@example.com")
    failed = enqueue(jobs.always_fails)
    an_hour_ago = timezone.now() - datetime.timedelta(hours=1)
    Job.objects.exclude(pk=failed.pk).update(run_at=an_hour_ago)
    Job.objects.filter(pk=failed.pk).update(status=JobStatus.FAILED, finished_at=an_hour_ago)
    address = live_server.url.removeprefix("http://")
    server = prometheus([Target(address, "/dbjobs/metrics", TOKEN)], rule_files=(ALERT_RULES,))
    up = {(("instance", address), ("job", "target0")): 1.0}
    assert server.settles("up", up) == up, server.output()
    due = {(("queue", "default"),): 3.0, (("queue", "emails"),): 2.0}
    assert server.settles('sum by (queue) (dbjobs_jobs{state="ready_due"})', due) == due
    dead = {(("queue", "default"),): 1.0}
    assert server.settles("sum by (queue) (dbjobs_dead_letters > 0)", dead) == dead
    serving = {(("queue", "default"),): 1.0}
    assert server.settles("sum by (queue) (dbjobs_queue_workers > 0)", serving) == serving
    lag = server.query("dbjobs_queue_lag_seconds")
    assert all(3500 < seconds < 4000 for seconds in lag.values()) and len(lag) == 2, lag
    # The alert rules the docs give: every one evaluates without error, and the queue nobody
    # serves has its alert pending (it fires after its "for" of 5 minutes).
    pending = {
        (
            ("alertname", "DbjobsQueueWithoutWorker"),
            ("alertstate", "pending"),
            ("queue", "emails"),
            ("severity", "critical"),
        ): 1.0
    }
    assert server.settles('ALERTS{alertname="DbjobsQueueWithoutWorker"}', pending) == pending, server.output()
    assert server.settles('ALERTS{alertname="DbjobsNoLiveWorker"}', {}) == {}  # a live worker, counted
    rules = [rule for group in server.api("rules")["groups"] for rule in group["rules"]]
    assert len(rules) == 7 and {rule["health"] for rule in rules} == {"ok"}, rules
