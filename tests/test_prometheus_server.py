"""A real Prometheus server scrapes run_jobs --metrics-port and reads a known workload back through its API.

Runs only with DBJOBS_TEST_PROMETHEUS=1 (.ci/run sets it): it starts a server process.
"""

import os
import signal

import pytest

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from tests import jobs
from tests.conftest import wait_for
from tests.metrics_helpers import free_port
from tests.prometheus_server import OPT_IN, PrometheusServer, Target

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

    def start(targets: list[Target]) -> PrometheusServer:
        directory = tmp_path / f"prometheus{len(started)}"
        directory.mkdir()
        server = PrometheusServer(targets, directory)
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
    server = prometheus([Target(f"127.0.0.1:{port}") for port in ports])
    assert wait_for(lambda: WorkerProcess.objects.count() == 3, 60), alone.output() + supervisor.output()
    up = {(("instance", f"127.0.0.1:{port}"), ("job", f"target{n}")): 1.0 for n, port in enumerate(ports)}
    assert server.settles("up", up) == up, server.output()
    for n in range(3):
        enqueue(jobs.add, n, n)
    enqueue(jobs.always_fails)  # retried twice, then dead-lettered
    for n in range(4):
        enqueue(jobs.send_email, f"{n}@example.com")  # the "emails" queue: the supervisor's children
    finished = lambda: Job.objects.filter(status__in=[JobStatus.SUCCESSFUL, JobStatus.FAILED]).count() == 8  # noqa: E731
    assert wait_for(finished, 60), alone.output() + supervisor.output()
    outcomes = {
        (("outcome", "succeeded"), ("queue", "default")): 3.0,
        (("outcome", "retried"), ("queue", "default")): 2.0,
        (("outcome", "failed"), ("queue", "default")): 1.0,
        (("outcome", "succeeded"), ("queue", "emails")): 4.0,
    }
    query = "sum by (queue, outcome) (dbjobs_jobs_finished_total)"
    assert server.settles(query, outcomes) == outcomes, server.output()
    runs = {(("job_name", "tests.jobs.add"),): 3.0, (("job_name", "tests.jobs.always_fails"),): 3.0}
    runs[(("job_name", "tests.jobs.send_email"),)] = 4.0
    assert server.settles("sum by (job_name) (dbjobs_job_duration_seconds_count)", runs) == runs
    delays = {(("queue", "default"),): 6.0, (("queue", "emails"),): 4.0}
    assert server.settles("sum by (queue) (dbjobs_job_start_delay_seconds_count)", delays) == delays
    for worker in (alone, supervisor):
        worker.process.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, worker.output()
