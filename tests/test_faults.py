"""Everyday faults, with real run_jobs processes: one bad job, receiver or value costs no other job.

Test settings: heartbeat every 0.2 s, timeout 1.5 s, sweep every 0.3 s.
"""

import collections
import signal
import time

import pytest
from django.db import connection, connections

from django_dbjobs import bulk_enqueue, enqueue, prepare
from django_dbjobs.models import Isolation, Job, JobStatus
from tests import jobs
from tests.conftest import freeze, restart_database, start_database, stop_database, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def statuses():
    return collections.Counter(Job.objects.values_list("status", flat=True))


def test_a_job_that_kills_its_process_costs_its_neighbours_nothing(run_jobs, record_file):
    """400 quick jobs, one calling os._exit(1) in the middle; a supervisor restarts the worker."""
    before = [prepare(jobs.record, i, max_attempts=3) for i in range(200)]
    poison = prepare(jobs.exit_process, max_attempts=3)
    after = [prepare(jobs.record, i, max_attempts=3) for i in range(200, 399)]
    bulk_enqueue([*before, poison, *after])
    deaths = 0
    deadline = time.monotonic() + 120

    def settled():
        return not Job.objects.filter(status__in=[JobStatus.READY, JobStatus.RUNNING]).exists()

    while True:  # as systemd or Kubernetes would: start the worker again when it dies
        assert time.monotonic() < deadline, f"not settled: {statuses()}"
        worker = run_jobs("--concurrency", "2", "-v", "0")
        assert wait_for(lambda worker=worker: worker.process.poll() is not None or settled(), 60)
        if worker.process.poll() is None:
            worker.signal()
            assert worker.wait() == 0, worker.output()
            break
        assert worker.process.returncode == 1, worker.output()  # os._exit(1) from the poison job
        deaths += 1
    poison_row = Job.objects.get(pk=poison.pk)
    assert poison_row.status == JobStatus.FAILED
    assert poison_row.attempts == 3
    lost = "django_dbjobs.exceptions.WorkerLost"
    assert [e["exception_class_path"] for e in poison_row.errors] == [lost] * 3
    assert deaths == 4, "one uncharged death (nobody knew it had started), then three charged"
    innocent = Job.objects.exclude(pk=poison.pk)
    assert innocent.count() == 399
    assert set(innocent.values_list("status", flat=True)) == {JobStatus.SUCCESSFUL}
    assert set(innocent.values_list("attempts", flat=True)) == {1}, "no innocent job was charged"
    assert not innocent.exclude(errors=[]).exists()
    assert set(collections.Counter(record_file.read_text().split())) == {str(i) for i in range(399)}


def test_a_job_running_alone_is_not_charged_for_another_jobs_crash(run_jobs, record_file):
    """A job recovered from a crash runs alone: a poison job queued beside it waits for it."""
    alone = enqueue(jobs.sleep_then_record, 1, "alone", priority=10)
    Job.objects.filter(pk=alone.pk).update(isolation=Isolation.WAITING)
    poison = enqueue(jobs.exit_process, max_attempts=3)
    worker = run_jobs("--concurrency", "2", "-v", "2")
    assert worker.wait(timeout=30) == 1, worker.output()  # the poison job killed it
    alone.refresh_from_db()
    assert (alone.status, alone.attempts, alone.errors) == (JobStatus.SUCCESSFUL, 1, [])
    assert record_file.read_text() == "alone\n"
    assert Job.objects.get(pk=poison.pk).status == JobStatus.RUNNING  # swept later, uncharged


def test_a_raising_signal_receiver_is_logged_and_the_worker_goes_on(run_jobs):
    first = [enqueue(jobs.add, i, 1) for i in range(10)]
    fails = enqueue(jobs.always_fails, 3, max_attempts=1)
    worker = run_jobs("--concurrency", "2", env={"DBJOBS_TEST_RAISING_RECEIVERS": "1"})
    assert wait_for(lambda: Job.objects.exclude(status__in=["SUCCESSFUL", "FAILED"]).count() == 0, 30)
    later = enqueue(jobs.add, 100, 1)  # enqueued after the receivers raised
    assert wait_for(lambda: Job.objects.filter(pk=later.pk, status=JobStatus.SUCCESSFUL).exists(), 30)
    assert worker.process.poll() is None, "the worker died:\n" + worker.output()
    worker.signal()
    assert worker.wait() == 0, worker.output()
    for job in first:
        job.refresh_from_db()
        assert (job.status, job.return_value) == (JobStatus.SUCCESSFUL, job.args[0] + 1)
    assert Job.objects.get(pk=fails.pk).status == JobStatus.FAILED
    output = worker.output()
    assert "Signal receiver" in output and "RuntimeError: receiver failed for 0" in output
    assert "Traceback" in output, "the receiver's traceback is logged"


def test_a_return_value_the_database_refuses_fails_that_job_alone(run_jobs):
    bulk_enqueue(prepare(jobs.add, i, 1) for i in range(50))
    bad = enqueue(jobs.returns_unstorable)
    bulk_enqueue(prepare(jobs.add, i, 1) for i in range(50, 99))
    # A long ack delay puts the bad value in a batch with the others.
    worker = run_jobs(
        "--concurrency", "2", env={"DBJOBS_TEST_RAW_RESULTS": "1", "DBJOBS_TEST_ACK_DELAY": "0.5"}
    )
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 99, 30), statuses()
    assert wait_for(lambda: Job.objects.filter(pk=bad.pk, status=JobStatus.FAILED).exists(), 10)
    started = time.monotonic()
    probe = enqueue(jobs.add, 1000, 1)  # the loop is not stalled
    assert wait_for(lambda: Job.objects.filter(pk=probe.pk, status=JobStatus.SUCCESSFUL).exists(), 10)
    assert time.monotonic() - started < 2
    worker.signal()
    assert worker.wait() == 0, worker.output()
    bad.refresh_from_db()
    if connection.vendor == "sqlite":  # SQLite refuses nothing: not JSON data, the worker's check refused it
        assert bad.last_error == "TypeError: Object of type object is not JSON serializable", bad.last_error
    else:
        assert bad.last_error.startswith("UnstorableResult: the job ran, but the database refused"), (
            bad.last_error
        )
    assert bad.return_value is None and bad.attempts == 1


def test_successes_are_stored_as_they_finish_during_the_shutdown_grace(run_jobs, record_file):
    quick = enqueue(jobs.announce_sleep_record, 1, "quick")
    slow = enqueue(jobs.announce_sleep_record, 6, "slow")
    worker = run_jobs("--concurrency", "2", "--shutdown-grace", "20", env={"DBJOBS_TEST_ACK_DELAY": "30"})
    # Both started (RUNNING alone is written by the claim; a claimed job no thread has
    # started yet is given back at once on SIGTERM, as it should be).
    assert wait_for(lambda: {"started:quick", "started:slow"} <= set(record_file.read_text().split()), 20)
    worker.signal()
    assert wait_for(lambda: Job.objects.filter(pk=quick.pk, status=JobStatus.SUCCESSFUL).exists(), 4), (
        "the quick job success waited for the slow one:\n" + worker.output()
    )
    assert Job.objects.get(pk=slow.pk).status == JobStatus.RUNNING
    assert worker.wait(timeout=30) == 0, worker.output()
    assert Job.objects.get(pk=slow.pk).status == JobStatus.SUCCESSFUL


@pytest.mark.restarts_database
def test_a_second_signal_stops_the_worker_within_seconds_during_an_outage(run_jobs, record_file):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no server to stop")
    job = enqueue(jobs.sleep_then_record, 8, "long")
    worker = run_jobs("--shutdown-grace", "60")
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exists(), 20)
    stop_database()
    try:
        worker.process.send_signal(signal.SIGTERM)
        time.sleep(1.5)  # its grace: the job is still running; the database is gone
        assert worker.process.poll() is None
        started = time.monotonic()
        worker.process.send_signal(signal.SIGTERM)
        worker.wait(timeout=15)
        assert time.monotonic() - started < 8, worker.output()
    finally:
        start_database()
    connections.close_all()
    # It could not release the job: the job's lease runs out and another worker has it.
    rescuer = run_jobs()
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL).exists(), 60)
    rescuer.signal()
    assert rescuer.wait() == 0


def test_run_jobs_on_an_unmigrated_database_exits_at_once_with_a_clear_error(run_jobs, tmp_path):
    vendor = connection.vendor
    if vendor == "sqlite":
        name = str(tmp_path / "empty.sqlite3")
    else:
        name = "dbjobs_unmigrated"
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
            cursor.execute(f"CREATE DATABASE {name}")
    try:
        started = time.monotonic()
        worker = run_jobs(env={"DBJOBS_TEST_DATABASE_NAME": name})
        assert worker.wait(timeout=30) == 1
        assert time.monotonic() - started < 15
        output = worker.output()
        assert "Run `python manage.py migrate`" in output and "0001_initial" in output, output
    finally:
        if vendor != "sqlite":
            with connection.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {name}")


def test_a_frozen_worker_drops_the_jobs_it_prefetched_instead_of_starting_them(
    run_jobs, record_file, tmp_path
):
    # Quick jobs first, so the prefetch grows; then a long one holds the only thread
    # while later jobs wait, prefetched, in the frozen worker. The long one runs until the
    # test releases it, after the freeze: on a loaded machine a fixed sleep could end
    # before the freeze, and the later jobs run (and their unflushed successes be lost)
    # before it, which is the at-least-once the sweep promises, not what this test is about.
    release = tmp_path / "release"
    bulk_enqueue(prepare(jobs.record, f"warm-{i}", priority=10) for i in range(300))
    long = enqueue(jobs.record_when_released, str(release), "long", priority=5)
    bulk_enqueue(prepare(jobs.record, f"late-{i}") for i in range(20))
    frozen = run_jobs("--concurrency", "1", "-v", "2")
    frozen_id = None
    assert wait_for(lambda: "started:long" in record_file.read_text(), 30)
    frozen_id = Job.objects.get(pk=long.pk).worker
    prefetched = Job.objects.filter(worker=frozen_id, status=JobStatus.RUNNING).exclude(pk=long.pk)
    assert prefetched.exists(), "the test needs prefetched jobs"
    freeze(frozen)
    release.touch()  # the rescuer's run of it ends at once; the frozen one's when it thaws
    rescuer = run_jobs("--concurrency", "2")
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 321, 60), statuses()
    frozen.signal(signal.SIGCONT)
    time.sleep(2)
    for worker in (frozen, rescuer):
        worker.signal()
        assert worker.wait() == 0, worker.output()
    runs = collections.Counter(record_file.read_text().split())
    late_runs = {value: count for value, count in runs.items() if value.startswith("late-")}
    outputs = f"\nfrozen:\n{frozen.output()}\nrescuer:\n{rescuer.output()}"
    runs_text = record_file.read_text()
    assert len(late_runs) == 20 and set(late_runs.values()) == {1}, (late_runs, runs_text, outputs)
    assert "Prefetched job" in frozen.output() and "dropped" in frozen.output()


@pytest.mark.restarts_database
def test_jobs_using_the_database_succeed_first_time_after_a_server_restart(run_jobs):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no server to restart")
    before = [enqueue(jobs.count_jobs) for _ in range(20)]
    worker = run_jobs("--concurrency", "2", "--poll-interval", "0.1")
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 20, 30)
    restart_database()
    after = [enqueue(jobs.count_jobs) for _ in range(20)]
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 40, 60), statuses()
    assert worker.process.poll() is None, worker.output()
    worker.signal()
    assert worker.wait() == 0, worker.output()
    for job in before + after:
        job.refresh_from_db()
        assert (job.status, job.attempts, job.errors) == (JobStatus.SUCCESSFUL, 1, []), job.errors


def test_a_job_only_the_new_release_knows_waits_for_a_worker_that_does(run_jobs):
    import tests.new_release  # noqa: F401 - the enqueuing process runs the new release
    from django_dbjobs.exceptions import UnimportedJobWarning
    from django_dbjobs.registry import discovery

    discovery.forget()
    with pytest.warns(UnimportedJobWarning, match="tests.new_release"):  # this worker's settings lack it
        job = enqueue("tests.new_release.new_feature", "deploy")
    old = run_jobs("--poll-interval", "0.1")
    assert wait_for(lambda: "not a registered job" in Job.objects.get(pk=job.pk).last_error, 20)
    old.signal()
    assert old.wait() == 0, old.output()
    job.refresh_from_db()
    assert (job.status, job.attempts, job.worker_ids) == (JobStatus.READY, 0, [])
    new = run_jobs("--poll-interval", "0.1", env={"DBJOBS_TEST_NEW_RELEASE": "1"})
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL).exists(), 30)
    new.signal()
    assert new.wait() == 0, new.output()
    job.refresh_from_db()
    assert (job.return_value, job.attempts) == ("new deploy", 1)
    assert "handed back" in old.output()
