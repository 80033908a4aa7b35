"""Traces through a real run_jobs worker (--processes too), and a package that works without OpenTelemetry."""

import os
import subprocess
import sys

import pytest
from django.db import connection
from opentelemetry.trace import SpanKind

from django_dbjobs import enqueue
from tests import jobs, trace_export
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("processes", [1, 2])
def test_a_run_jobs_worker_continues_the_trace_of_each_enqueue(spans, run_jobs, tmp_path, processes):
    stored = [enqueue(jobs.opens_a_span, f"inside {n}") for n in range(6)]
    sends = {span.attributes["messaging.message.id"]: span for span in spans.get_finished_spans()}
    path = tmp_path / "spans.jsonl"
    # The worker's provider batches its spans for a minute: they are in the file only if
    # each process flushed them as it ended.
    worker = run_jobs("--burst", "--processes", str(processes), env={"DBJOBS_TEST_TRACE_FILE": str(path)})
    assert worker.wait() == 0, worker.output()
    exported = trace_export.read(path)
    runs = {
        s["attributes"]["messaging.message.id"]: s for s in exported if s["kind"] == SpanKind.CONSUMER.name
    }
    assert sorted(runs) == sorted(job.pk for job in stored)
    inside = {s["parent_id"]: s for s in exported if s["name"].startswith("inside")}
    for job in stored:
        run, send = runs[job.pk], sends[job.pk]
        assert (run["trace_id"], run["parent_id"]) == (send.context.trace_id, send.context.span_id)
        assert run["attributes"]["messaging.destination.name"] == "default"
        assert inside[run["span_id"]]["trace_id"] == send.context.trace_id
    pids = {s["pid"] for s in exported}
    assert worker.process.pid not in pids or processes == 1  # --processes: its children ran them


BLOCKED = """
import sys


class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"{name} is not installed here")


sys.meta_path.insert(0, Blocker())
import django

django.setup()
from django.db import transaction

from django_dbjobs import enqueue, enqueue_many
from django_dbjobs.testing import run_jobs
from django_dbjobs.worker import Worker
from tests import jobs

with transaction.atomic():
    job = enqueue(jobs.add, 1, 2)
    enqueue_many(jobs.noop, [(1,), (2,)])
    assert [ran.status for ran in run_jobs()] == ["SUCCESSFUL"] * 3
    assert job.trace_context is None
    transaction.set_rollback(True)
enqueue(jobs.add, 2, 3)
Worker(burst=True).run()
assert [name for name in sys.modules if name.startswith("opentelemetry")] == []
print("worked without opentelemetry")
"""


def test_the_package_enqueues_and_runs_jobs_without_opentelemetry():
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DBJOBS_TEST_DATABASE_NAME": str(connection.settings_dict["NAME"]),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "worked without opentelemetry" in done.stdout
