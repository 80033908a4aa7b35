"""observability/run_hooks.py: a failing hook never costs a job its run or its outcome."""

import contextlib
import logging

import pytest

from django_dbjobs import enqueue
from django_dbjobs.models import JobStatus
from django_dbjobs.observability import run_hooks
from django_dbjobs.testing import run_jobs
from tests import jobs

pytestmark = pytest.mark.django_db


@pytest.fixture
def hooks():
    added = []

    def add(hook, kind):
        (run_hooks.add_wrapper if kind == "wrapper" else run_hooks.add_listener)(hook)
        added.append(hook)

    yield add
    for hook in added:
        run_hooks.remove(hook)


def test_wrappers_and_listeners_see_each_run_and_outcome_in_order(hooks):
    seen = []

    @contextlib.contextmanager
    def wrapper(job):
        seen.append(("enter", job.name))
        yield
        seen.append(("exit", job.name))

    hooks(wrapper, "wrapper")
    hooks(wrapper, "wrapper")  # added twice: called once
    hooks(lambda job, status, failure: seen.append(("outcome", status, type(failure).__name__)), "listener")
    enqueue(jobs.add, 2, 3)
    enqueue(jobs.fails_until_attempt, 2)
    run_jobs(include_scheduled=True)  # the retry too, however soon it is due
    assert seen == [
        ("enter", "tests.jobs.add"),
        ("outcome", JobStatus.SUCCESSFUL, "NoneType"),
        ("exit", "tests.jobs.add"),
        ("enter", "tests.jobs.fails_until_attempt"),
        ("outcome", JobStatus.READY, "ConnectionError"),
        ("exit", "tests.jobs.fails_until_attempt"),
        ("enter", "tests.jobs.fails_until_attempt"),
        ("outcome", JobStatus.SUCCESSFUL, "NoneType"),
        ("exit", "tests.jobs.fails_until_attempt"),
    ]


def test_hooks_that_raise_are_logged_and_the_job_still_runs_and_is_stored(hooks, caplog):
    calls = []

    def fails_to_start(job):
        raise RuntimeError("exporter down")

    @contextlib.contextmanager
    def fails_to_end(job):
        calls.append("entered")
        yield
        raise RuntimeError("exporter down at the end")

    def listener(job, status, failure):
        raise RuntimeError("metrics down")

    hooks(fails_to_start, "wrapper")
    hooks(fails_to_end, "wrapper")
    hooks(listener, "listener")
    job = enqueue(jobs.add, 2, 3)
    with caplog.at_level(logging.ERROR, logger="django_dbjobs"):
        run_jobs()
    job.refresh_from_db()
    assert (job.status, job.return_value) == (JobStatus.SUCCESSFUL, 5)
    assert calls == ["entered"]
    messages = [record.getMessage() for record in caplog.records]
    assert any("A run hook failed at the start of job" in m for m in messages), messages
    assert any("A run hook failed at the end of job" in m for m in messages), messages
    assert any("An outcome hook failed for job" in m for m in messages), messages


def test_removed_hooks_are_not_called(hooks):
    seen = []
    listener = lambda job, status, failure: seen.append(status)  # noqa: E731
    run_hooks.add_listener(listener)
    run_hooks.remove(listener)
    run_hooks.remove(listener)  # not there any more: nothing
    enqueue(jobs.add, 1, 1)
    run_jobs()
    assert seen == []
    assert run_hooks.wrapping(None) is run_hooks.wrapping(None)  # nothing registered: one shared no-op
