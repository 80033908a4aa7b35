"""run_jobs --metrics-port: the worker's Prometheus metrics, scraped over HTTP from real workers."""

import os
import signal
import socket
import subprocess
import sys

import pytest
from django.db import connection, transaction
from django.utils import timezone
from prometheus_client import CollectorRegistry

from django_dbjobs import enqueue
from django_dbjobs.exceptions import JobCancelled, JobTimeout, WorkerLost
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from django_dbjobs.models.settling import CANCELLED
from django_dbjobs.observability.outcomes import OUTCOMES, outcome_of
from django_dbjobs.observability.worker_metrics import UNREGISTERED, WorkerMetrics
from django_dbjobs.worker.leases.sweep import sweep
from django_dbjobs.worker.lifecycle.stop_signals import TAKEN_SIGNALS
from tests import jobs
from tests.conftest import ROOT, wait_for
from tests.metrics_helpers import only, scrape
from tests.server_process import free_port

FINISHED = "dbjobs_jobs_finished_total"
TIMED_OUT = "dbjobs_jobs_timed_out_total"
STARTED = "dbjobs_jobs_started_total"


def endpoint(run_jobs, *args, env=None):
    port = free_port()
    worker = run_jobs(
        "--metrics-address", "127.0.0.1", "--metrics-port", str(port), "-v", "1", *args, env=env
    )
    return worker, f"http://127.0.0.1:{port}/metrics"


def counts(url: str, name: str, **labels) -> dict:
    return {
        dict(key).get("outcome", dict(key).get("job_name")): value
        for key, value in only(scrape(url), name, **labels).items()
    }


def settles(url: str, name: str, expected: dict, **labels) -> dict:
    """The counts at `url` once they equal `expected` (or after 30 s, for the assertion to show)."""
    wait_for(lambda: counts(url, name, **labels) == expected, 30)
    return counts(url, name, **labels)


@pytest.mark.parametrize(
    ("status", "failure", "errors", "expected"),
    [
        (JobStatus.SUCCESSFUL, None, [], "succeeded"),
        (JobStatus.READY, ValueError("x"), [], "retried"),
        (JobStatus.READY, WorkerLost("x"), [], "retried"),
        (JobStatus.READY, None, [], None),  # an unknown name handed back: never ran
        (JobStatus.FAILED, ValueError("x"), [], "failed"),
        (JobStatus.FAILED, None, [{"exception_class_path": "x.UnknownJob"}], "failed"),
        (JobStatus.FAILED, JobCancelled("x"), [], "cancelled"),
        (JobStatus.FAILED, ValueError("x"), [{"exception_class_path": CANCELLED}], "cancelled"),
        (JobStatus.READY, JobTimeout("x"), [], "retried"),  # counted timed out too, apart
        (JobStatus.FAILED, JobTimeout("x"), [], "failed"),
    ],
)
def test_each_stored_outcome_has_one_label(status, failure, errors, expected):
    assert outcome_of(Job(name="a", errors=errors), status, failure) == expected


@pytest.fixture
def recorded():
    """Worker metrics in a registry of their own, hooked to this process's runs for the test."""
    collectors = CollectorRegistry()
    metrics = WorkerMetrics(collectors)
    metrics.hook()
    yield collectors
    metrics.unhook()


def test_jobs_the_sweep_recovers_charged_count_as_retried_then_failed(recorded, db):
    """The orphan sweep stores outcomes too: a charged loss is retried, the last one failed."""
    enqueue(jobs.send_email, "a@example.com", max_attempts=2)
    with transaction.atomic():
        Job.objects.claim("dead-0", 1)  # the first loss is uncharged: not an outcome
    sweep("sweeper", timeout=30)
    for attempt in (1, 2):
        with transaction.atomic():
            [job] = Job.objects.claim(f"dead-{attempt}", 1)
        assert job.mark_started_alone(f"dead-{attempt}")
        sweep("sweeper", timeout=30)
    assert Job.objects.get().status == JobStatus.FAILED
    labels = {"queue": "emails", "job_name": "tests.jobs.send_email"}
    counted = {o: recorded.get_sample_value(FINISHED, {**labels, "outcome": o}) for o in OUTCOMES}
    assert counted == {"succeeded": None, "retried": 1.0, "failed": 1.0, "cancelled": None}
    assert recorded.get_sample_value(TIMED_OUT, labels) is None


def test_names_the_worker_does_not_know_share_one_series_and_one_cache_entry(db):
    """Names read from the table are unbounded: the series and the worker's lookups of them are not."""
    collectors = CollectorRegistry()
    metrics = WorkerMetrics(collectors)
    for n in range(50):
        job = Job(name=f"gone.job_{n}", queue="default", errors=[], run_at=timezone.now())
        with metrics.run(job):
            pass
        metrics.outcome(job, JobStatus.FAILED, JobTimeout("x"))
    labels = {"queue": "default", "job_name": UNREGISTERED}
    assert collectors.get_sample_value(STARTED, labels) == 50.0
    assert collectors.get_sample_value(FINISHED, {**labels, "outcome": "failed"}) == 50.0
    assert collectors.get_sample_value(TIMED_OUT, labels) == 50.0
    assert len(metrics._by_job) == 1 and len(metrics._children) == 2  # finished{failed}, timed_out


def test_without_metrics_nothing_is_imported_or_hooked(transactional_db):
    """A worker run with metrics off never imports prometheus_client nor adds a run hook."""
    enqueue(jobs.add, 1, 2)
    script = (
        "import sys, django; django.setup()\n"
        "from django.core.management import call_command\n"
        "from django_dbjobs.observability import run_hooks\n"
        "call_command('run_jobs', '--burst')\n"
        "imported = 'prometheus_client' in sys.modules\n"
        "print('imported' if imported else 'not imported', len(run_hooks._wrappers))\n"
    )
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DBJOBS_TEST_DATABASE_NAME": str(connection.settings_dict["NAME"]),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["not", "imported", "0"], done.stderr
    assert Job.objects.get().status == JobStatus.SUCCESSFUL


@pytest.mark.django_db(transaction=True)
def test_a_worker_counts_every_start_and_outcome_of_a_known_workload(run_jobs):
    for n in range(3):
        enqueue(jobs.add, n, n)
    enqueue(jobs.fails_until_attempt, 2)  # retried once, then succeeds
    enqueue(jobs.always_fails)  # retried twice, then dead-lettered
    enqueue(jobs.swallows_exceptions)  # timed out, dead-lettered
    enqueue(jobs.spins_forever)  # timed out and retried, then timed out and dead-lettered
    worker, url = endpoint(run_jobs)
    finished = lambda: Job.objects.filter(status__in=[JobStatus.SUCCESSFUL, JobStatus.FAILED]).count() == 7  # noqa: E731
    assert wait_for(finished, 60), worker.output()
    by_job = {
        "tests.jobs.add": {"succeeded": 3.0},
        "tests.jobs.fails_until_attempt": {"retried": 1.0, "succeeded": 1.0},
        "tests.jobs.always_fails": {"retried": 2.0, "failed": 1.0},
        "tests.jobs.swallows_exceptions": {"failed": 1.0},
        "tests.jobs.spins_forever": {"retried": 1.0, "failed": 1.0},
    }
    for name, expected in by_job.items():
        assert settles(url, FINISHED, expected, queue="default", job_name=name) == expected, worker.output()
    started = {"tests.jobs.add": 3.0, "tests.jobs.fails_until_attempt": 2.0, "tests.jobs.always_fails": 3.0}
    started.update({"tests.jobs.swallows_exceptions": 1.0, "tests.jobs.spins_forever": 2.0})
    assert counts(url, STARTED, queue="default") == started
    timed_out = {"tests.jobs.swallows_exceptions": 1.0, "tests.jobs.spins_forever": 2.0}
    assert counts(url, TIMED_OUT, queue="default") == timed_out
    samples = scrape(url)
    durations = counts(url, "dbjobs_job_duration_seconds_count", queue="default")
    assert durations == started
    slow = only(samples, "dbjobs_job_duration_seconds_bucket", job_name="tests.jobs.swallows_exceptions")
    assert (
        slow[(("le", "0.25"), ("queue", "default"))] == 0
        and slow[(("le", "+Inf"), ("queue", "default"))] == 1
    )
    assert only(samples, "dbjobs_job_start_delay_seconds_count") == {(("queue", "default"),): 11.0}
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output()
    assert "Serving metrics url=http://127.0.0.1:" in worker.output()


@pytest.mark.django_db(transaction=True)
def test_processes_serve_one_endpoint_that_keeps_a_killed_childs_counts(run_jobs, tmp_path, record_file):
    children = lambda: set(WorkerProcess.objects.values_list("pid", flat=True))  # noqa: E731
    supervisor, url = endpoint(run_jobs, "--processes", "2", "--prefetch", "0", env={"TMPDIR": str(tmp_path)})
    assert wait_for(lambda: len(children()) == 2), supervisor.output()
    [directory] = tmp_path.glob("dbjobs-metrics-*")  # made by the supervisor before its children
    for n in range(8):
        enqueue(jobs.announce_sleep_record, 0.2, n)
    done = lambda count: lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == count  # noqa: E731
    assert wait_for(done(8), 60), supervisor.output()
    assert len(set(Job.objects.values_list("worker", flat=True))) == 2, "both processes ran jobs"
    name = "tests.jobs.announce_sleep_record"
    assert settles(url, FINISHED, {"succeeded": 8.0}, job_name=name) == {"succeeded": 8.0}, (
        supervisor.output()
    )
    killed = sorted(children())[0]
    os.kill(killed, signal.SIGKILL)
    assert wait_for(lambda: len(children() - {killed}) == 2, 60), supervisor.output()  # replaced
    for n in range(8, 12):
        enqueue(jobs.announce_sleep_record, 0, n)
    assert wait_for(done(12), 60), supervisor.output()
    assert settles(url, FINISHED, {"succeeded": 12.0}, job_name=name) == {"succeeded": 12.0}, (
        supervisor.output()
    )
    assert counts(url, STARTED, queue="default") == {name: 12.0}  # each run once, the killed child's too
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.wait(60) == 0, supervisor.output()
    assert not directory.exists(), "the supervisor removes the directory it made"


@pytest.mark.django_db(transaction=True)
def test_a_directory_the_user_set_is_used_and_kept(run_jobs, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("the user's")
    supervisor, url = endpoint(run_jobs, "--processes", "2", env={"PROMETHEUS_MULTIPROC_DIR": str(mine)})
    enqueue(jobs.add, 1, 1)
    assert settles(url, FINISHED, {"succeeded": 1.0}, job_name="tests.jobs.add") == {"succeeded": 1.0}, (
        supervisor.output()
    )
    assert list(mine.glob("counter_*.db")), "the children write their values there"
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.wait(60) == 0, supervisor.output()
    assert (mine / "keep.txt").read_text() == "the user's" and list(mine.glob("counter_*.db"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_port_in_use_is_a_clear_error_at_start(run_jobs, processes):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        worker = run_jobs("--processes", processes, "--metrics-address", "127.0.0.1", "--metrics-port", port)
        assert worker.wait(60) == 1, worker.output()
    assert f"Cannot serve metrics on 127.0.0.1:{port}: Address already in use." in worker.output()
    assert "Worker process started" not in worker.output() and not WorkerProcess.objects.exists()


def test_a_port_out_of_range_is_refused(run_jobs, transactional_db):
    worker = run_jobs("--metrics-port", "65536")
    assert worker.wait(60) != 0 and "--metrics-port: invalid port_number value" in worker.output()


def test_without_prometheus_client_the_option_says_what_to_install(run_jobs, transactional_db, tmp_path):
    blocked = tmp_path / "prometheus_client"
    blocked.mkdir()
    (blocked / "__init__.py").write_text("raise ImportError('not installed')\n")
    worker = run_jobs("--metrics-port", str(free_port()), env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert worker.wait(60) == 1, worker.output()
    assert "needs prometheus_client: pip install 'django-dbjobs[prometheus]'" in worker.output()
    assert not WorkerProcess.objects.exists()


def thread_masks(pid: int) -> dict[str, tuple[int, str]]:
    """Each live thread of `pid`: its blocked signals (SigBlk) and what it waits in (wchan)."""
    masks = {}
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{thread}/status") as status:
                blocked = next(line for line in status if line.startswith("SigBlk:")).split()[1]
            with open(f"/proc/{pid}/task/{thread}/wchan") as wchan:
                masks[thread] = (int(blocked, 16), wchan.read())
        except (FileNotFoundError, ProcessLookupError):
            continue  # that thread has ended
    return masks


@pytest.mark.skipif(
    not os.path.isdir("/proc/self/task"), reason="reads the threads' signal masks in /proc (Linux)"
)
def test_every_thread_of_a_worker_serving_metrics_keeps_the_taken_signals_blocked(run_jobs, transactional_db):
    """The metrics server starts before the worker takes its signals: its threads must not take them.

    The signal thread alone is left out: sigwait() unblocks what it waits for while it waits.
    """
    worker, url = endpoint(run_jobs)
    assert wait_for(lambda: scrape(url) and WorkerProcess.objects.exists(), 60), worker.output()
    assert scrape(url)  # a request's thread has run too
    taken = sum(1 << (signum - 1) for signum in TAKEN_SIGNALS)
    masks = thread_masks(worker.process.pid)
    waiting = [thread for thread, (_, wchan) in masks.items() if "sigtimedwait" in wchan]
    unblocked = {thread: hex(blocked) for thread, (blocked, _) in masks.items() if blocked & taken != taken}
    assert len(waiting) == 1 and len(masks) >= 4, masks  # main, signals, metrics server, worker thread(s)
    assert unblocked == {waiting[0]: hex(masks[waiting[0]][0])}, masks
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output()
