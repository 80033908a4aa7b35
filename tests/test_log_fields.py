"""Log fields (observability/log_fields.py): the id, name, queue and attempt on every line about a job."""

import datetime
import json
import logging
import signal
import textwrap
from pathlib import Path

import pytest
from django.db import transaction
from django.db.models.functions import Now

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus, Schedule, WorkerProcess
from django_dbjobs.observability import log_fields, run_hooks
from django_dbjobs.schedules.firing import run_now
from django_dbjobs.signals import job_started
from django_dbjobs.testing import run_jobs as run_jobs_here
from django_dbjobs.worker import Worker
from django_dbjobs.worker.leases.sweep import sweep
from django_dbjobs.worker.running import cancel_watch, execution
from tests import jobs
from tests.conftest import wait_for

LOGGER = "django_dbjobs"


def expected(job, attempt):
    return {"job_id": job.pk, "job_name": job.name, "job_queue": job.queue, "job_attempt": attempt}


def fields_of(record):
    return {key: getattr(record, key, "(missing)") for key in log_fields.JOB_FIELDS}


def line(caplog, start):
    """The one record of ours whose message starts with `start`."""
    found = [r for r in caplog.records if r.name == LOGGER and r.getMessage().startswith(start)]
    assert len(found) == 1, [r.getMessage() for r in caplog.records]
    return found[0]


def claim(worker="w1"):
    with transaction.atomic():
        (job,) = Job.objects.claim(worker, 1)
    return job


def test_the_fields_are_the_jobs_own_and_clash_with_no_log_record_attribute():
    job = Job(id="0190-a", name="tests.jobs.add", queue="emails", attempts=2)
    extra = log_fields.for_job(job)
    assert extra == {
        "job_id": "0190-a",
        "job_name": "tests.jobs.add",
        "job_queue": "emails",
        "job_attempt": 2,
    }
    assert tuple(extra) == log_fields.JOB_FIELDS
    assert log_fields.for_schedule("nightly", job) == {**extra, "schedule_name": "nightly"}
    assert log_fields.for_count(3) == {"job_count": 3}
    record = logging.getLogger(LOGGER).makeRecord(LOGGER, logging.INFO, "f", 1, "m", (), None)
    taken = {*record.__dict__, "message", "asctime"}
    for key in [*extra, "schedule_name", "job_count"]:
        assert key not in taken, key
    # makeRecord() refuses an extra that would overwrite one of the record's own attributes.
    with pytest.raises(KeyError):
        logging.getLogger(LOGGER).makeRecord(LOGGER, logging.INFO, "f", 1, "m", (), None, extra={"name": 1})
    made = logging.getLogger(LOGGER).makeRecord(LOGGER, logging.INFO, "f", 1, "m", (), None, extra=extra)
    assert fields_of(made) == extra


@pytest.mark.django_db
def test_enqueue_start_and_success_lines_carry_the_fields(caplog):
    caplog.set_level(logging.DEBUG, LOGGER)
    job = enqueue(jobs.send_email, "a@example.com")
    run_jobs_here()
    assert fields_of(line(caplog, "Job enqueued")) == expected(job, 0)
    assert fields_of(line(caplog, "Job started")) == expected(job, 1)
    assert fields_of(line(caplog, "Job succeeded")) == expected(job, 1)
    assert job.queue == "emails"


@pytest.mark.django_db
def test_retry_and_dead_letter_lines_carry_their_attempt(caplog):
    caplog.set_level(logging.DEBUG, LOGGER)
    job = enqueue(jobs.always_fails, "kaput", max_attempts=2, queue="emails")
    run_jobs_here(include_scheduled=True)
    retry = line(caplog, "Job will retry")
    assert (retry.levelno, fields_of(retry)) == (logging.WARNING, expected(job, 1))
    failed = line(caplog, "Job failed")
    assert (failed.levelno, fields_of(failed)) == (logging.ERROR, expected(job, 2))
    started = [fields_of(r) for r in caplog.records if r.getMessage().startswith("Job started")]
    assert started == [expected(job, 1), expected(job, 2)]


@pytest.mark.django_db(transaction=True)
def test_a_timed_out_jobs_dead_letter_line_carries_the_fields(caplog):
    caplog.set_level(logging.INFO, LOGGER)
    job = enqueue(jobs.swallows_exceptions)
    Worker(burst=True, concurrency=1).run()
    failed = line(caplog, "Job failed")
    assert "JobTimeout" in failed.getMessage()
    assert fields_of(failed) == expected(job, 1)


@pytest.mark.django_db
def test_cancel_lines_carry_the_fields(caplog):
    caplog.set_level(logging.INFO, LOGGER)
    before = enqueue(jobs.add, 1, 2)
    claimed = claim()
    Job.objects.filter(pk=before.pk).update(cancel_requested_at=Now())
    claimed.refresh_from_db()
    execution.run(claimed, "w1")  # asked to stop before it started: never runs, not charged
    assert "JobCancelled" in line(caplog, "Job failed").getMessage()
    assert fields_of(line(caplog, "Job failed")) == expected(before, claimed.attempts)

    given_back = enqueue(jobs.add, 3, 4, queue="emails")
    held = claim("w2")
    assert Job.objects.filter(pk=given_back.pk).request_cancel() == 1
    released, cancelled = Job.objects.give_back("w2", [held])
    assert (released, [job.pk for job in cancelled]) == (0, [given_back.pk])
    cancel_watch.given_back_cancelled(cancelled[0])
    assert fields_of(line(caplog, "Job cancelled")) == expected(given_back, cancelled[0].attempts)


@pytest.mark.django_db
def test_unknown_job_lines_carry_the_fields(caplog, settings):
    caplog.set_level(logging.INFO, LOGGER)
    unknown = Job.objects.create(name="os.system", args=["true"], queue="emails", max_attempts=5)
    assert execution.run(claim(), "w1") == JobStatus.READY
    # The pickup is undone in the table; the line names the attempt this worker picked up.
    assert fields_of(line(caplog, "Job handed back")) == expected(unknown, 1)
    settings.DBJOBS_UNKNOWN_JOB_GRACE = 0
    Job.objects.filter(pk=unknown.pk).update(run_at=Now())
    assert execution.run(claim(), "w1") == JobStatus.FAILED
    assert fields_of(line(caplog, "Job failed: no worker knew its name")) == expected(unknown, 1)


@pytest.mark.django_db
def test_a_dropped_outcome_line_carries_the_fields(caplog):
    caplog.set_level(logging.INFO, LOGGER)
    job = enqueue(jobs.add, 1, 2)
    Job.objects.filter(pk=claim("old-owner").pk).update(worker="new-owner")  # swept and claimed again
    assert execution.run(Job.objects.get(pk=job.pk), "old-owner") is None
    dropped = line(caplog, "Job outcome dropped")
    assert (dropped.levelno, fields_of(dropped)) == (logging.WARNING, expected(job, 1))


@pytest.mark.django_db
def test_sweep_lines_carry_the_fields_without_reading_each_job_again(caplog, monkeypatch):
    caplog.set_level(logging.INFO, LOGGER)
    WorkerProcess.objects.create(id="dead", hostname="h", pid=1, concurrency=1)
    WorkerProcess.objects.filter(pk="dead").update(heartbeat_at=Now() - datetime.timedelta(seconds=60))
    job = enqueue(jobs.add, 1, 1, queue="emails", max_attempts=1)
    claim("dead")
    # A field the sweep did not load would be read by one query per job (a deferred field).
    monkeypatch.setattr(Job, "refresh_from_db", lambda *a, **k: pytest.fail("a deferred field was read"))
    assert sweep("sweeper", timeout=30).given_back == 1
    assert fields_of(line(caplog, "Job given back from a lost worker")) == expected(job, 0)  # uncharged
    claimed = claim("dead-again")
    assert claimed.mark_started_alone("dead-again")
    assert sweep("sweeper", timeout=30).failed == 1
    assert fields_of(line(caplog, "Job failed: its worker was lost")) == expected(job, 1)


@pytest.mark.django_db
def test_a_failing_signal_receiver_or_run_hook_is_logged_with_the_fields(caplog):
    caplog.set_level(logging.INFO, LOGGER)

    def receiver(sender, job, **kwargs):
        raise RuntimeError("receiver")

    def listener(job, status, failure):
        raise RuntimeError("listener")

    job = enqueue(jobs.add, 1, 2)
    job_started.connect(receiver)
    run_hooks.add_listener(listener)
    try:
        run_jobs_here()
    finally:
        job_started.disconnect(receiver)
        run_hooks.remove(listener)
    assert fields_of(line(caplog, "Signal receiver")) == expected(job, 1)
    assert fields_of(line(caplog, "An outcome hook failed")) == expected(job, 1)


@pytest.mark.django_db
def test_a_schedules_lines_carry_its_name_and_its_jobs_fields(caplog, django_capture_on_commit_callbacks):
    caplog.set_level(logging.INFO, LOGGER)
    schedule = Schedule.objects.create(name="nightly", cron="0 3 * * *", job="tests.jobs.tick")
    with django_capture_on_commit_callbacks(execute=True):
        job, created = run_now(schedule)
    assert created
    record = line(caplog, "Schedule run now")
    assert fields_of(record) == expected(job, 0)
    assert record.schedule_name == "nightly"


@pytest.mark.django_db(transaction=True)
def test_a_workers_json_lines_for_a_retried_then_failed_job_carry_the_fields(run_jobs, tmp_path):
    """A real run_jobs, its LOGGING writing JSON (tests/json_log.py, the formatter of the docs)."""
    path = tmp_path / "worker.jsonl"
    job = enqueue(jobs.always_fails, "kaput", max_attempts=2, queue="emails")
    worker = run_jobs("--queues", "default,emails", env={"DBJOBS_TEST_JSON_LOG": str(path)})
    assert wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.FAILED), worker.output()
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    lines = [json.loads(text) for text in path.read_text().splitlines()]
    about = [entry for entry in lines if entry.get("job_id") == job.pk]
    assert [(entry["level"], entry["message"].split(" id=")[0], entry["job_attempt"]) for entry in about] == [
        ("DEBUG", "Job started", 1),
        ("WARNING", "Job will retry", 1),
        ("DEBUG", "Job started", 2),
        ("ERROR", "Job failed", 2),
    ]
    for entry in about:
        assert (entry["job_name"], entry["job_queue"]) == ("tests.jobs.always_fails", "emails")
    assert "ValueError: kaput" in about[1]["exception"] and "ValueError: kaput" in about[3]["exception"]
    assert any(entry["message"].startswith("Worker stopped") for entry in lines), "the worker's own lines too"


def test_the_docs_show_the_formatter_the_worker_test_runs():
    docs = (Path(__file__).resolve().parent.parent / "docs" / "observability.rst").read_text()
    source = (Path(__file__).resolve().parent / "json_log.py").read_text()
    code = source[source.index("import json") :]
    assert textwrap.indent(code, "    ", lambda text: text.strip() != "") in docs
