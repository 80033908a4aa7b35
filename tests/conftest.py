import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.db import connection

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
def record_file(tmp_path, monkeypatch):
    """A file that tests.jobs.record appends to, here and in subprocesses."""
    path = tmp_path / "record.txt"
    path.touch()
    monkeypatch.setenv("DBJOBS_TEST_RECORD", str(path))
    return path


def wait_for(predicate, timeout: float = 20, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
