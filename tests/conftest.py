import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.server_process import wait_for

ROOT = Path(__file__).resolve().parent.parent


def pytest_report_header(config):
    from django.conf import settings

    db = settings.DATABASES["default"]
    return f"dbjobs test database: {db['ENGINE'].rsplit('.', 1)[-1]} {db.get('HOST') or ''}".strip()


class WorkerProcess:
    """A real `run_jobs` subprocess against the test database."""

    def __init__(self, *args: str, env: dict | None = None):
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DBJOBS_TEST_DATABASE_NAME": str(connection.settings_dict["NAME"]),
            "PYTHONPATH": str(ROOT),
            **(env or {}),
        }
        # A file, not a pipe: a pipe nobody reads fills up and blocks the worker.
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "django", "run_jobs", *args],
            cwd=ROOT,
            env=environment,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def signal(self, signum: int = signal.SIGTERM) -> None:
        # Until the worker has registered, its signal handlers may not be installed
        # yet and SIGTERM would kill it outright.
        from django_dbjobs.models import WorkerProcess as Row

        wait_for(lambda: self.process.poll() is not None or Row.objects.filter(pid=self.process.pid).exists())
        self.process.send_signal(signum)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"run_jobs did not exit within {timeout}s:\n{self.output()}") from None

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def run_jobs():
    """Start `run_jobs` subprocesses; any left running are killed after the test."""
    started = []

    def start(*args: str, env: dict | None = None) -> WorkerProcess:
        worker = WorkerProcess(*args, env=env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


@pytest.fixture
def chains(transactional_db):
    """Migrate the app's tables afresh by one of its migration chains (tests/migration_chains.py)."""
    from tests.migration_chains import fresh_tables

    yield from fresh_tables()


@pytest.fixture
def record_file(tmp_path, monkeypatch):
    """A file that tests.jobs.record appends to, here and in subprocesses."""
    path = tmp_path / "record.txt"
    path.touch()
    monkeypatch.setenv("DBJOBS_TEST_RECORD", str(path))
    return path


#: Tests that stop the database server run only when this variable is 1 (.ci/run sets it):
#: a developer's own worker or application on the same server would lose its connections.
RESTARTS_OPT_IN = "DBJOBS_TEST_RESTART_DATABASES"


def pytest_collection_modifyitems(config, items):
    if os.environ.get(RESTARTS_OPT_IN) == "1":
        return
    skip = pytest.mark.skip(
        reason=f"stops and starts the database server; set {RESTARTS_OPT_IN}=1 to run it (CI does)"
    )
    for item in items:
        if item.get_closest_marker("restarts_database"):
            item.add_marker(skip)


def restart_database():
    """Restart the server this test database lives on, with the machine's own commands."""
    stop_database()
    start_database()


def stop_database():
    """Stop the server this test database lives on (PostgreSQL or MariaDB).

    Only for tests marked ``restarts_database``, which run only when asked.
    """
    import shutil
    import subprocess

    from django.db import connections

    assert os.environ.get(RESTARTS_OPT_IN) == "1", f"stopping the database server needs {RESTARTS_OPT_IN}=1"
    connections.close_all()
    if connection.vendor == "postgresql":
        if not shutil.which("pg_ctlcluster"):
            pytest.skip("pg_ctlcluster is not available to restart PostgreSQL")
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", _pg_version(), "main", "stop", "-m", "fast"],
            check=True,
            timeout=60,
        )
    else:
        if not shutil.which("mariadb-admin") or not shutil.which("start-stop-daemon"):
            pytest.skip("mariadb-admin/start-stop-daemon are not available to restart MariaDB")
        subprocess.run(["mariadb-admin", "-h127.0.0.1", "-uroot", "shutdown"], check=True, timeout=60)
        # start-stop-daemon --oknodo does nothing while the old process is still exiting.
        assert wait_for(
            lambda: subprocess.run(["pgrep", "-x", "mariadbd"], capture_output=True).returncode != 0, 60
        ), "MariaDB did not stop"


def start_database():
    """Start the server stop_database() stopped, and wait until it answers."""
    import subprocess

    if connection.vendor == "postgresql":
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", _pg_version(), "main", "start"],
            check=True,
            timeout=60,
        )
    else:
        subprocess.run(
            ["start-stop-daemon", "--start", "--oknodo", "--background", "--exec", "/usr/sbin/mariadbd"],
            check=True,
            timeout=60,
        )
    assert wait_for(server_answers, 60), "the database did not come back"


def _pg_version():
    import subprocess

    return subprocess.run(["ls", "/etc/postgresql"], capture_output=True, text=True).stdout.split()[0]


def server_answers():
    from django.db import connections

    try:
        connections.close_all()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        return False


def stop_process(pid: int, timeout: float = 10) -> None:
    """SIGSTOP `pid` and return once every thread of it has stopped.

    kill() returns before the stop takes hold: on a loaded machine a thread of the target
    ran on for tens of milliseconds after it (2 in 100 tries on this 2-core machine), long
    enough to see a file the test wrote next and run the jobs the freeze was to hold back.
    """
    os.kill(pid, signal.SIGSTOP)
    if not os.path.isdir("/proc/self/task"):  # no /proc (macOS): as before, trust kill()
        return
    deadline = time.monotonic() + timeout
    while not _all_threads_stopped(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} did not stop within {timeout}s of SIGSTOP")
        time.sleep(0.001)


def _all_threads_stopped(pid: int) -> bool:
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return True  # gone: nothing of it runs
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/stat") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue  # that thread has ended
        if state not in ("T", "t"):
            return False
    return True


def freeze(worker: WorkerProcess, attempts: int = 50) -> None:
    """SIGSTOP `worker`, at a moment it holds no SQLite write lock.

    A process frozen inside a write transaction keeps SQLite's one write lock, so no other
    process can write until it thaws: nothing any queue can recover from, and not what
    the freezing tests are about. On SQLite the worker is thawed and frozen again until it
    stops outside a write (its writes take about a millisecond). Servers lock rows, not
    the database: one SIGSTOP is enough there.
    """
    import sqlite3

    for _ in range(attempts):
        worker.signal(signal.SIGSTOP)
        stop_process(worker.process.pid)  # stopped now, every thread of it (see stop_process)
        if connection.vendor != "sqlite":
            return
        probe = sqlite3.connect(str(connection.settings_dict["NAME"]), timeout=0.05, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            worker.process.send_signal(signal.SIGCONT)
            time.sleep(0.02)
        finally:
            probe.close()
    raise AssertionError("the worker was inside a write every time it was frozen")


def live_worker(worker_id: str = "h:1:a", **fields):
    """A WorkerProcess row that stays live for an hour, however slowly a loaded machine runs the test.

    A row stamped with the database clock is live for DBJOBS_HEARTBEAT_TIMEOUT (1.5 s in the
    tests): too short for a check made from a subprocess that is still starting.
    """
    import datetime

    from django.utils import timezone

    from django_dbjobs.models import WorkerProcess

    hostname, pid, _ = worker_id.split(":")
    values = {"hostname": hostname, "pid": int(pid), "concurrency": 1}
    values.update(fields)
    return WorkerProcess.objects.create(
        id=worker_id, heartbeat_at=timezone.now() + datetime.timedelta(hours=1), **values
    )


@pytest.fixture
def waiter():
    """An IdleWaiter listening on PostgreSQL, its first wake-up (from connecting) taken."""
    from django_dbjobs.worker.lifecycle.idle_wait import IdleWaiter
    from django_dbjobs.worker.lifecycle.wake_event import WakeEvent

    event = WakeEvent()
    waiter = IdleWaiter("default", event, None)
    waiter.start()
    try:
        assert waiter.wait(1) is True  # listening from now on: look for work once
        yield waiter
    finally:
        waiter.stop()
        event.close()


@pytest.fixture
def spans():
    """Trace with an OpenTelemetry SDK provider for this test; yield its in-memory exporter.

    The API lets a process set its provider once: the fixture puts the API's globals
    back as they were, so the tests after it run untraced.
    """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from django_dbjobs.observability import consuming, run_hooks

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _forget_tracer_provider()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        _forget_tracer_provider()
        run_hooks.remove(consuming.running)
        run_hooks.remove(consuming.finished)
        provider.shutdown()


def _forget_tracer_provider():
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
