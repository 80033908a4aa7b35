"""Progress with real run_jobs workers: seen while a job runs, written at most once a second, kept after
the job ends, from async jobs too, and never a stall of the loop behind a job's own row lock."""

import signal
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbjobs import db, enqueue
from django_dbjobs.db.outage import Outage
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.models.progress import Progress
from django_dbjobs.worker.running import execution
from tests import jobs, long_jobs
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def watch(job: Job, timeout: float = 30) -> tuple[list[tuple[float, Progress]], Job]:
    """Read `job`'s row every 20 ms until it ends: the progress records seen while it ran, each
    with when it was first seen (a new ``at`` is a new write), and the row as it ended."""
    seen: list[tuple[float, Progress]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = Job.objects.get(pk=job.pk)
        if row.status not in (JobStatus.RUNNING, JobStatus.READY):
            return seen, row
        progress = Progress.from_record(row.progress_state)
        if row.status == JobStatus.RUNNING and progress and (not seen or progress.at != seen[-1][1].at):
            seen.append((time.monotonic(), progress))
        time.sleep(0.02)
    raise AssertionError(f"job {job.pk} did not end within {timeout}s")


@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "fails"])
def test_progress_reported_a_thousand_times_a_second_is_written_about_once_a_second_and_kept(run_jobs, fail):
    seconds = 4
    job = enqueue(long_jobs.count_with_progress, seconds, fail)
    worker = run_jobs("--concurrency", "2")
    seen, row = watch(job)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    # Seen while it ran, and written anew about every second: never once per report.
    assert seconds - 1 <= len(seen) <= seconds + 2, seen
    gaps = [later - earlier for (earlier, _p), (later, _q) in zip(seen, seen[1:], strict=False)]
    assert min(gaps) > 0.6, gaps  # a second apart, less how late the 20 ms poll saw them
    reports = [progress for _when, progress in seen]
    assert all(progress.note.startswith("item ") for progress in reports)
    assert [p.done for p in reports] == sorted({p.done for p in reports}) and reports[-1].done > 1000
    assert reports[-1].rate is not None and reports[-1].rate > 100
    # The last report is kept with the outcome.
    final = Progress.from_record(row.progress_state)
    assert row.status == (JobStatus.FAILED if fail else JobStatus.SUCCESSFUL)
    assert final.note == "last" and final.total == final.done > reports[-1].done
    if not fail:
        assert row.return_value == final.done


def test_an_async_job_reports_progress_and_its_last_report_is_kept(run_jobs):
    job = enqueue(long_jobs.async_count_with_progress, 500)
    worker = run_jobs()
    assert wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.SUCCESSFUL, timeout=20)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    final = Job.objects.get(pk=job.pk).progress
    assert (final.done, final.total, final.note, final.percent) == (500, 500, "async", 100)


@pytest.mark.skipif(
    not db.can_skip_locked(),
    reason="SQLite has no row locks: a job's writing transaction holds the whole database, every "
    "claim and outcome of every worker waits for it (the progress writer alone gives up at once: "
    "test_progress_writer.py)",
)
def test_a_job_holding_its_row_locked_does_not_stall_the_worker(run_jobs, record_file):
    holder = enqueue(long_jobs.hold_own_row, 6, "held")
    worker = run_jobs("--concurrency", "2")
    assert wait_for(lambda: "locked:held" in record_file.read_text().split(), timeout=20)
    time.sleep(1.5)  # a progress write is due meanwhile: it must skip the locked row
    other = enqueue(jobs.add, 1, 2)
    assert wait_for(lambda: Job.objects.get(pk=other.pk).status == JobStatus.SUCCESSFUL, timeout=3), (
        Job.objects.get(pk=other.pk).status,
        worker.output(),
    )
    assert Job.objects.get(pk=holder.pk).status == JobStatus.RUNNING  # still holding its row
    assert wait_for(lambda: Job.objects.get(pk=holder.pk).status == JobStatus.SUCCESSFUL, timeout=20)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    final = Job.objects.get(pk=holder.pk)
    assert (final.progress.done, final.progress.note, final.checkpoint_state) == (3, "done", {"at": 1})


@pytest.mark.parametrize(
    ("fail", "status"), [(False, JobStatus.SUCCESSFUL), (True, JobStatus.READY)], ids=["success", "retry"]
)
def test_an_outcome_written_alone_stores_the_last_report_in_its_update(fail, status):
    """mark_succeeded() and mark_for_retry() (a job stored outside the success batch: one that
    runs alone or with a concurrency key; a failed attempt) carry the report, in one UPDATE."""
    job = enqueue(long_jobs.report_then_end, fail)
    (claimed,) = Job.objects.claim("h:1:alone")
    with CaptureQueriesContext(connection) as queries:
        assert execution.run(claimed, "h:1:alone", outage=Outage("default")) == status
    row = Job.objects.get(pk=job.pk)
    assert row.status == status and (row.progress.done, row.progress.note) == (7, "ending")
    writes = [q["sql"] for q in queries if "progress_state" in q["sql"] and q["sql"].startswith("UPDATE")]
    assert len(writes) == 1 and "status" in writes[0]


def test_a_job_given_back_at_shutdown_keeps_its_last_report(run_jobs):
    job = enqueue(long_jobs.count_with_progress, 60)
    worker = run_jobs("--shutdown-grace", "0")
    assert wait_for(lambda: Job.objects.get(pk=job.pk).progress_state is not None, timeout=20)
    time.sleep(0.3)
    asked = timezone.now()
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    row = Job.objects.get(pk=job.pk)
    assert row.status == JobStatus.READY and row.attempts == 0  # given back, uncharged
    assert row.progress.at > asked and row.progress.note.startswith("item ")
